"""Builds libdetect with the Makefile and puts it into the package.

pyproject.toml holds the metadata; this file only drives the C build from
the package build: `pip install .` runs `make lib` (the shared library, and
the CUDA backend where nvcc exists) and copies build/libdetect.so.N (and
libdetect_cuda.so, which the library loads from beside itself) into
python/detect/ of the build, so the installed package needs nothing else."""

import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def read_abi():
    with open(os.path.join(ROOT, "include", "detect.h")) as f:
        for line in f:
            if line.startswith("#define DETECT_ABI_VERSION"):
                return int(line.split()[2])
    raise RuntimeError("include/detect.h: no DETECT_ABI_VERSION")


class BuildWithLibrary(build_py):
    def run(self):
        build = os.environ.get("DETECT_BUILD_DIR", "build")
        subprocess.check_call(["make", "-C", ROOT, f"BUILD={build}", "lib"])
        super().run()
        dest = os.path.join(self.build_lib, "detect")
        os.makedirs(dest, exist_ok=True)
        soname = f"libdetect.so.{read_abi()}"
        # copyfile follows the build tree's links: the package holds the file itself.
        shutil.copyfile(os.path.join(ROOT, build, soname), os.path.join(dest, soname))
        cuda = os.path.join(ROOT, build, "libdetect_cuda.so")
        if os.path.exists(cuda):
            shutil.copyfile(cuda, os.path.join(dest, "libdetect_cuda.so"))


class BinaryDistribution(Distribution):
    """The wheel holds a shared library: tag it for this platform."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
