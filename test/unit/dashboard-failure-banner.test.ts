import { describe, expect, it } from 'vitest';

// app.js is browser code (see dashboard-chart.test.ts): the helper's signature is restated here.
interface ReadFailure {
  message: string;
  unreachable?: string;
}
interface BannerHelpers {
  failureBanner(failures: readonly ReadFailure[], refreshMs: number): string;
}
const appJs = '../../infra/ops-tools/dashboard/app.js';
const { failureBanner } = (await import(appJs)) as BannerHelpers;

const refused = (path: string): ReadFailure => ({
  message: `GET ${path}: the pipeline is unreachable (Failed to fetch)`,
  unreachable: 'Failed to fetch',
});
const paths = ['/ops/status', '/ops/history', '/ops/events?limit=20', '/ops/outbox/dead', '/ops/audit'];

describe("the dashboard's error banner", () => {
  it('says once that the pipeline is unreachable, with its reason, when no read got an answer', () => {
    expect(failureBanner(paths.map(refused), 2_000)).toBe(
      'The pipeline is unreachable (Failed to fetch): what is shown may be stale. Retrying every 2 s.',
    );
  });

  it('names each distinct reason once', () => {
    const banner = failureBanner(
      [
        refused('/ops/status'),
        { ...refused('/ops/audit'), unreachable: 'NetworkError' },
        refused('/ops/history'),
      ],
      2_000,
    );

    expect(banner).toBe(
      'The pipeline is unreachable (Failed to fetch; NetworkError): what is shown may be stale. Retrying every 2 s.',
    );
  });

  it('lists each failure that came with an answer, and counts the reads that got none on one line', () => {
    const banner = failureBanner(
      [
        { message: 'GET /ops/status failed: 500 internal error' },
        refused('/ops/history'),
        { message: 'GET /ops/audit failed: 503 the audit store is down' },
        refused('/ops/events?limit=20'),
      ],
      2_000,
    );

    expect(banner.split('\n')).toEqual([
      'Some figures could not be read; they may be stale. Retrying every 2 s.',
      '2 of the requests got no answer (Failed to fetch)',
      'GET /ops/status failed: 500 internal error',
      'GET /ops/audit failed: 503 the audit store is down',
    ]);
  });
});
