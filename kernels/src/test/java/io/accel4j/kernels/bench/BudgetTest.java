package io.accel4j.kernels.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class BudgetTest {

    @Test
    void aCaseGetsItsShareUntilTheTotalIsNearlySpent() {
        FakeClock clock = new FakeClock(1, 1);
        Budget b = new Budget(clock, Budget.nanos(10), Budget.nanos(3));
        long start = clock.getAsLong();
        assertThat(b.caseDeadline()).isEqualTo(start + Budget.nanos(3));
        assertThat(b.secondsLeft()).isEqualTo(10);
        clock.advanceMs(8_500);
        assertThat(b.spent()).isFalse();
        assertThat(b.caseDeadline()).isEqualTo(start + Budget.nanos(10)); // 1.5 s left < 3 s share
        clock.advanceMs(1_500);
        assertThat(b.spent()).isTrue();
        assertThat(b.secondsLeft()).isZero();
    }

    @Test
    void budgetsMustBePositive() {
        assertThatThrownBy(() -> new Budget(System::nanoTime, 0, 1)).hasMessageContaining("total 0");
        assertThatThrownBy(() -> new Budget(System::nanoTime, 1, -5)).hasMessageContaining("per case -5");
    }
}
