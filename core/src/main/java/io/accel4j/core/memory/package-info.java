/**
 * Where a backend's buffers live and how data crosses to them: {@link io.accel4j.core.memory.DeviceMemory} (arenas
 * of device segments, copies host → device, device → host and device → device, zeroing), implemented for the CPU by
 * {@link io.accel4j.core.memory.HostMemory} and for CUDA by {@code io.accel4j.kernels.CudaMemory}. A backend names
 * its memory through {@link io.accel4j.core.ops.Ops#memory()}, so model code allocates and copies the same way on
 * either.
 */
package io.accel4j.core.memory;
