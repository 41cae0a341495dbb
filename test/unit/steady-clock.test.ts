import { afterEach, describe, expect, it } from 'vitest';
import { steadyClock } from '../../infra/local/steady-clock';
import { realNow, restoreWallClock, stepWallClock } from '../support/wall-clock';

afterEach(() => restoreWallClock());

const hours = (n: number) => n * 3_600_000;

describe('the runtime steady clock', () => {
  it('starts at the wall clock and moves with time passing, not with a step of the wall clock', () => {
    stepWallClock(0);
    const realStart = realNow();
    const clock = steadyClock();
    const first = clock();
    expect(first).toBeGreaterThanOrEqual(realStart);

    stepWallClock(hours(25));
    const afterForward = clock();
    stepWallClock(-hours(25));
    const afterBack = clock();

    // Never more than the real time that passed (a millisecond of rounding aside), never back.
    expect(afterForward).toBeGreaterThanOrEqual(first);
    expect(afterBack).toBeGreaterThanOrEqual(afterForward);
    expect(afterBack - first).toBeLessThanOrEqual(realNow() - realStart + 1);
  });
});
