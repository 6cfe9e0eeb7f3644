package io.accel4j.nn;

import java.util.List;

/**
 * Where a pipeline stage's activation regions ({@link ActivationPlan}) live: in the memory every micro-batch slot has,
 * or in memory the stage has once and its slots share. Under fp32 storage every region is the slot's (the plan as it
 * is: {@link #perSlot}). Under 16-bit storage ({@link #sharingWorkingSet}) the fp32 working set the blocks hold for
 * one layer (the regions keyed {@link Builder#HELD_PREFIX}…) is the stage's, shared by its slots as a network's blocks
 * share it: each block of each slot keeps what its backward reads in its own 16-bit store ({@link HalfStore}, a
 * region of the slot) and expands it before its backward when another block — of this micro-batch or another —
 * overwrote the working set ({@link Pass.Holders} names the pass as well as the module). So a stage holding S
 * micro-batches keeps S sets of 16-bit stores and one fp32 working set, not S fp32 sets.
 *
 * <p>Regions keep the plan's sizes (each rounded to 16 floats) and order within their part, so offsets stay
 * 64-byte aligned.
 *
 * @param offset      float offset of each region within its part
 * @param common      whether each region is the stage's (null: none is)
 * @param slotBytes   bytes of the regions every slot has
 * @param commonBytes bytes of the regions the stage has once (0 under fp32 storage)
 */
record SlotLayout(long[] offset, boolean[] common, long slotBytes, long commonBytes) {

    /** Every region in the slot, at the plan's offsets. */
    static SlotLayout perSlot(ActivationPlan plan) {
        List<ActivationPlan.Region> regions = plan.regions();
        long[] offset = new long[regions.size()];
        for (int i = 0; i < offset.length; i++) {
            offset[i] = regions.get(i).offset();
        }
        return new SlotLayout(offset, null, plan.bytes(), 0);
    }

    /** The regions held for one layer in the stage's memory, the others in the slot's. */
    static SlotLayout sharingWorkingSet(ActivationPlan plan) {
        List<ActivationPlan.Region> regions = plan.regions();
        long[] offset = new long[regions.size()];
        boolean[] common = new boolean[regions.size()];
        long slot = 0, stage = 0;
        for (int i = 0; i < offset.length; i++) {
            ActivationPlan.Region r = regions.get(i);
            common[i] = r.shared() && r.name().startsWith(Builder.HELD_PREFIX);
            if (common[i]) {
                offset[i] = stage;
                stage = Math.addExact(stage, r.floats());
            } else {
                offset[i] = slot;
                slot = Math.addExact(slot, r.floats());
            }
        }
        return new SlotLayout(offset, common, Math.multiplyExact(slot, (long) Float.BYTES),
                Math.multiplyExact(stage, (long) Float.BYTES));
    }

    /** {@link #sharingWorkingSet} when {@code share}, else {@link #perSlot}. */
    static SlotLayout of(ActivationPlan plan, boolean share) {
        return share ? sharingWorkingSet(plan) : perSlot(plan);
    }
}
