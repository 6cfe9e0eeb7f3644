package io.accel4j.train.parallel;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * One message between asynchronous data parallelism's workers and parameter servers ({@link ShardServer}), and its
 * bytes on a {@link io.accel4j.collectives.Mailbox}: its kind, a few integers, a learning rate, a text and float
 * arrays (little-endian; lengths first).
 *
 * @param kind   what it is (the constants below)
 * @param ints   the kind's integers (see each constant)
 * @param lr     a push's learning rate
 * @param text   a failure's reason (empty otherwise)
 * @param arrays the kind's vectors (see each constant)
 */
record PsMessage(int kind, int[] ints, float lr, String text, float[][] arrays) {

    /** Worker 0 → server: the shard's initial parameters; arrays {@code [params]}. */
    static final int INIT = 1;
    /** Worker → server: a gradient; ints {@code [worker, clock, basedOn, needed]}, arrays {@code [grads]}. */
    static final int PUSH = 2;
    /**
     * Server → worker: the parameters once the version reached the push's {@code needed}; ints {@code [version,
     * staleness min, max, sum, count]} (the pushes applied since the last reply to worker 0; zero to the others),
     * arrays {@code [params]}.
     */
    static final int PARAMS = 3;
    /** Worker 0 → server: send the shard's state (a checkpoint). */
    static final int GATHER = 4;
    /** Server → worker 0: ints {@code [version]}, arrays {@code [params, m, v]}. */
    static final int STATE = 5;
    /** Worker 0 → server: a resumed checkpoint's shard; ints {@code [step]}, arrays {@code [params, m, v]}. */
    static final int RESTORE = 6;
    /** Worker → server: it has finished; ints {@code [worker]}. */
    static final int DONE = 7;
    /** Server → workers: it failed; text the reason. */
    static final int FAIL = 8;
    /** Anyone → server: fail now, as a server that died (tests). */
    static final int DIE = 9;

    static PsMessage of(int kind, int... ints) {
        return new PsMessage(kind, ints, 0f, "", new float[0][]);
    }

    static PsMessage of(int kind, int[] ints, float... array) {
        return new PsMessage(kind, ints, 0f, "", new float[][] {array});
    }

    byte[] encode() {
        byte[] t = text.getBytes(StandardCharsets.UTF_8);
        long bytes = 4L * (3 + ints.length) + 4 + 4 + t.length + 4;
        for (float[] a : arrays) {
            bytes += 4 + 4L * a.length;
        }
        ByteBuffer b = ByteBuffer.allocate(Math.toIntExact(bytes)).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(kind).putInt(ints.length);
        for (int i : ints) {
            b.putInt(i);
        }
        b.putFloat(lr).putInt(t.length).put(t).putInt(arrays.length);
        for (float[] a : arrays) {
            b.putInt(a.length);
            b.asFloatBuffer().put(a);
            b.position(b.position() + 4 * a.length);
        }
        return b.array();
    }

    static PsMessage decode(byte[] bytes) {
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        int kind = b.getInt();
        int[] ints = new int[b.getInt()];
        for (int i = 0; i < ints.length; i++) {
            ints[i] = b.getInt();
        }
        float lr = b.getFloat();
        byte[] t = new byte[b.getInt()];
        b.get(t);
        float[][] arrays = new float[b.getInt()][];
        for (int i = 0; i < arrays.length; i++) {
            arrays[i] = new float[b.getInt()];
            b.asFloatBuffer().get(arrays[i]);
            b.position(b.position() + 4 * arrays[i].length);
        }
        return new PsMessage(kind, ints, lr, new String(t, StandardCharsets.UTF_8), arrays);
    }
}
