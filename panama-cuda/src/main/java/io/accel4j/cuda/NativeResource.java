package io.accel4j.cuda;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The life cycle every owning class shares: released exactly once by the first {@link #close()} (later closes do
 * nothing), and any use after that refused with an {@link IllegalStateException} naming the object.
 */
abstract class NativeResource implements AutoCloseable {

    private final AtomicBoolean closed = new AtomicBoolean();

    /** What this object is, for messages: {@code "DeviceBuffer(1024 bytes)"}. */
    abstract String describe();

    /** Frees the native object; called once. */
    abstract void release();

    /** Throws unless open. */
    final void ensureOpen() {
        if (closed.get()) {
            throw new IllegalStateException(describe() + " is closed");
        }
    }

    public final boolean isClosed() {
        return closed.get();
    }

    @Override
    public final void close() {
        if (closed.compareAndSet(false, true)) {
            release();
        }
    }

    @Override
    public String toString() {
        return describe() + (isClosed() ? " [closed]" : "");
    }
}
