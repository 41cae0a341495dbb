import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PostgresProbe } from '../../infra/local/postgres-probe';

describe('the PostgreSQL probe judges health by what answers within a deadline', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('says down after two misses in a row, since the first, with why; up again at the next answer, and says each once', async () => {
    // What each probe finds, in turn: an answer, a miss, an answer, two misses, then answers.
    const found = [undefined, 'slow once', undefined, 'did not answer', 'did not answer'];
    const log = vi.fn();
    const recovered = vi.fn();
    const start = Date.now();
    const probe = new PostgresProbe({
      url: 'postgres://unused',
      periodMs: 1_000,
      missesToDown: 2,
      log,
      onRecovered: recovered,
      probe: async () => found.shift(),
    });

    probe.start();
    const seen: unknown[] = [];
    for (let i = 0; i < 6; i++) {
      await vi.advanceTimersByTimeAsync(i === 0 ? 0 : 1_000);
      seen.push(probe.state);
    }
    await probe.stop();

    expect(seen).toEqual([
      { up: true },
      { up: true }, // one miss is a slow answer, not an outage
      { up: true },
      { up: true },
      { up: false, cause: 'PostgreSQL did not answer', since: new Date(start + 3_000).toISOString() },
      { up: true },
    ]);
    expect(log.mock.calls.map(([message]) => message)).toEqual([
      'postgres not answering: did not answer',
      'postgres answering again after 2000 ms',
    ]);
    expect(recovered).toHaveBeenCalledTimes(1);
  });

  it('leaves a death to the supervisor: while it says down, no probe and no line of its own', async () => {
    let supervisorUp = true;
    const probed = vi.fn(async () => 'refused a new connection: connect ECONNREFUSED');
    const log = vi.fn();
    const probe = new PostgresProbe({
      url: 'postgres://unused',
      periodMs: 1_000,
      missesToDown: 2,
      log,
      supervised: () => (supervisorUp ? { up: true } : { up: false, cause: 'exited', since: 'then' }),
      probe: probed,
    });

    probe.start();
    await vi.advanceTimersByTimeAsync(0);
    supervisorUp = false;
    await vi.advanceTimersByTimeAsync(10_000);
    const whileDown = { calls: probed.mock.calls.length, state: probe.state };
    await probe.stop();

    expect(whileDown).toEqual({ calls: 1, state: { up: true } });
    expect(log).not.toHaveBeenCalled();
  });
});
