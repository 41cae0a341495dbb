import { describe, expect, it } from 'vitest';

// app.js is browser code (see dashboard-chart.test.ts): the helper's signature is restated here.
interface SummaryHelpers {
  healthSummary(status: unknown): { text: string; ok: boolean };
}
const appJs = '../../infra/ops-tools/dashboard/app.js';
const { healthSummary } = (await import(appJs)) as SummaryHelpers;

const up = { postgres: { up: true }, dynamo: { up: true }, bus: { up: true } };

describe("the dashboard's header verdict", () => {
  it('says all OK only when every component is up and every alarm OK', () => {
    expect(healthSummary({ components: up, alarms: { a: 'OK', b: 'OK' } })).toEqual({
      text: 'all OK',
      ok: true,
    });
    expect(healthSummary({ components: up, alarms: { a: 'OK', b: 'ALARM' } })).toEqual({
      text: '1 in ALARM',
      ok: false,
    });
  });

  it('names a component that is down, even while every alarm it could read is OK', () => {
    const status = {
      components: { ...up, dynamo: { up: false, cause: 'the DynamoDB engine exited' } },
      alarms: { a: 'OK', 'inbox-dead-index': 'INSUFFICIENT_DATA' },
    };

    expect(healthSummary(status)).toEqual({ text: 'dynamo down, 1 without data', ok: false });
  });

  it('is not all OK when the alarms could not be read', () => {
    expect(healthSummary({ components: up, alarms: null })).toEqual({ text: 'alarms unknown', ok: false });
  });
});
