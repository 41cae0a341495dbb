import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { restartDelayMs, type Supervised, Supervisor } from '../../infra/local/supervisor';

/** An engine the test kills by resolving its `died`. */
function fakeEngine(name: string) {
  let die!: (cause: string) => void;
  const died = new Promise<string>((resolve) => {
    die = resolve;
  });
  const engine = {
    name,
    died,
    stopped: false,
    stop: async () => {
      engine.stopped = true;
    },
    die,
  };
  return engine satisfies Supervised;
}

describe('the local supervisor', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('restarts a dead engine at once, then backs off while restarts fail, logging one line per failure and one on recovery', async () => {
    const log = vi.fn();
    const recovered = vi.fn();
    const first = fakeEngine('first');
    const second = fakeEngine('second');
    let attempts = 0;
    const supervisor = new Supervisor(first, {
      component: 'postgres',
      log: (message: string) => log(message),
      onRecovered: recovered,
      restart: async () => {
        attempts++;
        if (attempts < 3) throw new Error('pre-existing shared memory block is still in use');
        return second;
      },
    });

    first.die('the PostgreSQL postmaster exited (SIGKILL)');
    await vi.advanceTimersByTimeAsync(0);
    expect(attempts).toBe(1); // at once
    expect(supervisor.state).toMatchObject({
      up: false,
      cause: 'the PostgreSQL postmaster exited (SIGKILL)',
    });
    await vi.advanceTimersByTimeAsync(999);
    expect(attempts).toBe(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(attempts).toBe(2); // 1 s later
    await vi.advanceTimersByTimeAsync(2_000);
    expect(attempts).toBe(3); // 2 s later, and it starts

    expect(supervisor.current).toBe(second);
    expect(supervisor.state).toEqual({ up: true });
    expect(recovered).toHaveBeenCalledWith('postgres');
    expect(log.mock.calls.map(([m]) => m)).toEqual([
      'postgres failed: the PostgreSQL postmaster exited (SIGKILL); restarting it',
      'postgres restart failed: pre-existing shared memory block is still in use; trying again',
      'postgres restart failed: pre-existing shared memory block is still in use; trying again',
      'postgres recovered: restarted after 3000 ms',
    ]);
    await supervisor.stop();
    expect(second.stopped).toBe(true);
  });

  it('watches the restarted engine too, and leaves an engine stopped on request alone', async () => {
    const engines = [fakeEngine('a'), fakeEngine('b'), fakeEngine('c')];
    let next = 1;
    const supervisor = new Supervisor(engines[0] as Supervised, {
      component: 'dynamo',
      log: () => undefined,
      restart: async () => engines[next++] as Supervised,
    });

    engines[0]?.die('the dynalite worker exited (1)');
    await vi.advanceTimersByTimeAsync(0);
    engines[1]?.die('the dynalite worker exited (1)');
    await vi.advanceTimersByTimeAsync(60_000);

    expect(supervisor.current).toBe(engines[2]);
    await supervisor.stop();
    engines[2]?.die('stopped');
    await vi.advanceTimersByTimeAsync(60_000);
    expect(next).toBe(3);
  });

  it('waits at once, then 1 s doubling to a minute', () => {
    expect([1, 2, 3, 4, 8, 20].map(restartDelayMs)).toEqual([0, 1_000, 2_000, 4_000, 60_000, 60_000]);
  });
});
