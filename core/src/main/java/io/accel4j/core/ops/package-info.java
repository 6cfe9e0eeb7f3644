/**
 * The kernel contract: every operation a GPT-2 training step needs, backend-neutral, with llm.c's explicit sizes.
 *
 * <p>Sizes: {@code B} batch, {@code T} time (sequence length), {@code C} channels, {@code NH} heads ({@code hs = C/NH}
 * per head), {@code V} vocabulary, {@code Vp} padded vocabulary ({@code Vp ≥ V}, a row stride), {@code N} rows of a
 * flattened {@code (B·T, ·)} activation, {@code n} elements of a flat buffer.
 *
 * <p>Conventions shared by every interface here:
 * <ul>
 *   <li>Buffers are {@link java.lang.foreign.MemorySegment}s holding flat row-major arrays: fp32 unless a parameter
 *       says otherwise, tokens and targets as int32, little-endian. For the CPU backend they are host memory; a
 *       device backend takes segments whose address is a device pointer from its own allocator,
 *       {@link io.accel4j.core.ops.Ops#memory()}, whose copies are the only way data crosses to and from the host
 *       ({@link io.accel4j.core.memory.DeviceMemory}). A segment must hold at least the elements the sizes imply
 *       (more is allowed); element 0 is at the segment's start.</li>
 *   <li>Forward calls overwrite their outputs. <b>Backward calls add</b> ({@code +=}) into every gradient buffer they
 *       are given, as llm.c does, so a gradient reaching a tensor by two paths needs no extra buffer; the caller
 *       zeroes gradients before a step's first backward. Inputs are only read.</li>
 *   <li>Outputs must not overlap inputs unless a method says it works in place.</li>
 *   <li>Implementations check sizes once at the entry and throw {@link IllegalArgumentException} naming the
 *       argument and both numbers. Results do not depend on the number of threads an implementation uses: sums
 *       across rows are split into fixed chunks and combined in a fixed order.</li>
 * </ul>
 */
package io.accel4j.core.ops;
