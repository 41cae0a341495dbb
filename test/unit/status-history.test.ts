import { afterEach, describe, expect, it } from 'vitest';
import { startHttpServer } from '../../infra/local/http-server';
import { type HistorySample, StatusHistory } from '../../infra/local/status-history';
import { jsonResponse } from '../../shared/http/responses';
import { rawHttp } from '../support/raw-http';

// The dashboard chart's history lives in the runtime, so every page (and a reload) draws the
// same last hour. Readings are taken on demand here, on a clock the test owns.

const figures = (approved: number): Omit<HistorySample, 'at'> => ({
  approved,
  delivered: approved,
  oldestPendingAgeSeconds: 0,
});

describe('the status history', () => {
  it('keeps the readings of the last hour, oldest first, and forgets older ones', async () => {
    let now = 0;
    let approved = 0;
    const history = new StatusHistory({
      read: async () => figures(approved),
      periodMs: 10_000,
      clock: () => now,
    });

    for (let i = 0; i <= 400; i++) {
      now = i * 10_000;
      approved = i;
      await history.sampleNow();
    }

    const { samples, periodSeconds, windowSeconds } = history.snapshot();
    expect([periodSeconds, windowSeconds]).toEqual([10, 3600]);
    expect(samples).toHaveLength(361); // 3,600 s back from now, both ends included
    expect(samples[0]).toEqual({ at: 400_000 * 10 - 3_600_000, ...figures(40) });
    expect(samples.at(-1)).toEqual({ at: 4_000_000, ...figures(400) });
  });

  it('leaves a gap, never a zero, where a reading failed, and says why', async () => {
    let now = 1_000;
    const errors: unknown[] = [];
    let fail = false;
    const history = new StatusHistory({
      read: async () => {
        if (fail) throw new Error('database down');
        return figures(7);
      },
      clock: () => now,
      onError: (err) => errors.push(err),
    });

    await history.sampleNow();
    fail = true;
    now = 11_000;
    await history.sampleNow();

    expect(history.snapshot().samples).toEqual([{ at: 1_000, ...figures(7) }]);
    expect(errors).toEqual([new Error('database down')]);
  });
});

describe('GET /ops/history on the local server', () => {
  let server: Awaited<ReturnType<typeof startHttpServer>> | undefined;
  afterEach(async () => {
    const s = server;
    if (s) await new Promise((resolve) => s.server.close(resolve));
  });

  it('answers the history as JSON, and a 405 to anything but GET', async () => {
    const history = { periodSeconds: 10, windowSeconds: 3600, samples: [{ at: 1, ...figures(3) }] };
    const never = async () => jsonResponse(500, { error: 'not this handler' });
    server = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      tasksApi: never,
      opsApi: never,
      dashboardHtml: () => '',
      caller: 'local:test',
      history: () => history,
    });

    const got = await rawHttp(server.url, { method: 'GET', target: '/ops/history' });
    const posted = await rawHttp(server.url, {
      method: 'POST',
      target: '/ops/history',
      headers: [['content-type', 'application/json']],
      body: '{}',
    });

    expect(got.status).toBe(200);
    expect(JSON.parse(got.body)).toEqual(history);
    expect(posted.status).toBe(405);
  });
});
