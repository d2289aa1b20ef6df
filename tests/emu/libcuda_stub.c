/* build-emu/libcuda.so.1: an empty library under the driver's name. The
 * engine's loader (engine/backend/backend_cuda_loader.c) only checks that the
 * driver library loads before it loads the backend; under the emulator the
 * backend needs nothing from it. */
int mr_emu_libcuda_stub;
