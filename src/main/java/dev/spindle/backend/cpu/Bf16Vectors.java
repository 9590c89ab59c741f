package dev.spindle.backend.cpu;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;

/**
 * Vector API helpers for bf16 data. One species for everything (the widest the CPU
 * has), so every reduction has one fixed order on a given machine: that is what
 * makes a decode step equal a prefill window bit for bit.
 */
final class Bf16Vectors {
    static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    static final VectorSpecies<Short> S = VectorSpecies.of(short.class, VectorShape.forBitSize(F.vectorBitSize() / 2));
    static final VectorSpecies<Integer> I = VectorSpecies.of(int.class, F.vectorShape());
    static final int L = F.length();
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private Bf16Vectors() {
    }

    /** L bf16 values at {@code byteOffset} widened to fp32 (exact). */
    static FloatVector load(MemorySegment seg, long byteOffset) {
        return ShortVector.fromMemorySegment(S, seg, byteOffset, LE)
                .convertShape(VectorOperators.S2I, I, 0)
                .lanewise(VectorOperators.LSHL, 16)
                .reinterpretAsFloats();
    }

    /** Lanes rounded to bf16 (nearest even), kept as fp32. NaN inputs are not expected here. */
    static FloatVector round(FloatVector v) {
        IntVector i = v.reinterpretAsInts();
        IntVector lsb = i.lanewise(VectorOperators.LSHR, 16).lanewise(VectorOperators.AND, 1);
        return i.add(lsb).add(0x7fff).lanewise(VectorOperators.AND, 0xffff0000).reinterpretAsFloats();
    }

    /** Sum of the lanes, left to right: a fixed order, unlike {@code reduceLanes}. */
    static float sumLanes(FloatVector v, float[] scratch) {
        v.intoArray(scratch, 0);
        float s = scratch[0];
        for (int l = 1; l < L; l++) {
            s += scratch[l];
        }
        return s;
    }
}
