#!/usr/bin/python3
"""rewrite_launches.py IN.cu OUT.cc: a cuda/*.cu file as plain C++ for the
CUDA emulator (tests/emu/emu_device.h).

Two rewrites, nothing else changes (line numbers are kept, so compiler
errors and sanitizer reports point at the real .cu line):
  k<<<grid, block[, shared[, stream]]>>>(args)
      -> emu_launch(FIBERS, "k", emu_config(grid, block, shared, stream), &k, args)
     FIBERS is 1 when the kernel's body calls __syncthreads (its threads
     then run as fibers that meet at each barrier), else 0.
  extern __shared__ T name[];  ->  T *name = (T *)emu_dynamic_shared();
"""
import re
import sys

LAUNCH = re.compile(r"\b([A-Za-z_]\w*)(\s*<[^<>;()]*>)?\s*<<<(.*?)>>>\s*\(", re.S)
DYN_SHARED = re.compile(r"extern\s+__shared__\s+([A-Za-z_][\w\s]*?)\s+([A-Za-z_]\w*)\s*\[\s*\]\s*;")
KERNEL = re.compile(r"__global__\s+void\s+([A-Za-z_]\w*)\s*\(")


def kernels_with_barriers(src):
    """Names of the __global__ functions whose body calls __syncthreads."""
    names = set()
    for m in KERNEL.finditer(src):
        start = src.find("{", m.end())
        depth, i = 0, start
        while i < len(src):
            if src[i] == "{":
                depth += 1
            elif src[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        if "__syncthreads" in src[start:i]:
            names.add(m.group(1))
    return names


def rewrite(src):
    fibers = kernels_with_barriers(src)

    def launch(m):
        name, targs, cfg = m.group(1), m.group(2) or "", m.group(3)
        rest = src[m.end():]
        comma = "" if rest.lstrip().startswith(")") else ", "
        flag = 1 if name in fibers else 0
        # newlines inside <<< >>> are kept so every later line keeps its number
        return 'emu_launch(%d, "%s", emu_config(%s), &%s%s%s' % (flag, name, cfg, name, targs.strip(), comma)

    out = LAUNCH.sub(launch, src)
    return DYN_SHARED.sub(lambda m: "%s *%s = (%s *)emu_dynamic_shared();" % (m.group(1), m.group(2), m.group(1)),
                          out)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: rewrite_launches.py IN.cu OUT.cc")
    with open(sys.argv[1]) as f:
        src = f.read()
    out = rewrite(src)
    if "<<<" in out:
        sys.exit("%s: a launch the rewrite does not understand is left" % sys.argv[1])
    with open(sys.argv[2], "w") as f:
        f.write('#line 1 "%s"\n' % sys.argv[1])
        f.write(out)


if __name__ == "__main__":
    main()
