import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { afterEach, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { readLocalAwsCredentials } from '../../infra/local/local-credentials';
import { clearStaleServer, removeLocalPostgres } from '../../infra/local/postgres';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { alarmIds } from '../../shared/ops/alarm-ids';
import { deliveryBoundMs, pipelineClient, tempDataDir } from '../support/pipeline-client';
import { perConsumer, subscriberNames } from '../support/topology-expectations';
import { waitFor } from '../support/wait-for';

/**
 * The delivery audit flags an effect whose event has no outbox row: an event someone put on the
 * bus with its credentials (another process of the same user, another pipeline) that the
 * pipeline never committed. Before, such an event's notification, archive object and index
 * document went unnoticed: the task trace empty, the audit finding nothing, no alarm.
 */

const runtimes: Runtime[] = [];
const children: ChildProcess[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const c of children.splice(0)) {
    if (c.pid && c.exitCode === null && c.signalCode === null) process.kill(-c.pid, 'SIGKILL');
  }
  for (const r of runtimes.splice(0)) await r.stop();
  for (const d of dirs.splice(0)) {
    await removeLocalPostgres(join(d, 'postgres'));
    rmSync(d, { recursive: true, force: true });
  }
});

/** A `content.approved` the pipeline never committed, for `taskId`, put on the bus with the data directory's key. */
async function forgeApproval(busEndpoint: string, dataDir: string, taskId: string): Promise<string> {
  const credentials = readLocalAwsCredentials(dataDir);
  if (!credentials) throw new Error(`no credentials in ${dataDir}`);
  const eventId = randomUUID();
  const now = new Date().toISOString();
  const client = new EventBridgeClient({
    endpoint: busEndpoint,
    region: 'us-east-1',
    credentials: { ...credentials },
  });
  try {
    const answer = await client.send(
      new PutEventsCommand({
        Entries: [
          {
            Source: topology.source,
            DetailType: topology.eventTypes.approved,
            EventBusName: topology.busName,
            Detail: JSON.stringify({
              specversion: '1.0',
              id: eventId,
              source: topology.source,
              type: topology.eventTypes.approved,
              subject: taskId,
              time: now,
              datacontenttype: 'application/json',
              data: {
                taskId,
                version: 2,
                title: 'forged',
                assignee: null,
                reviewer: 'mallory',
                approvedAt: now,
              },
            }),
          },
        ],
      }),
    );
    expect(answer.FailedEntryCount).toBe(0);
  } finally {
    client.destroy();
  }
  return eventId;
}

/** The consumers a (forged) `content.approved` goes to. */
const approvedBy = subscriberNames(topology.eventTypes.approved);
/** `audit.foreignEffects` once a forged approval is found: one for each consumer of it, 0 for any other. */
const oneForEachConsumerOfIt = perConsumer((c) => (approvedBy.includes(c) ? 1 : 0));

/** Waits until each consumer of content.approved has processed `n` events. */
const processedAll = (url: string, n: number) =>
  waitFor(
    () => pipelineClient(url).status(),
    (s) =>
      approvedBy.every((c) => (s.consumers as Record<string, { processed: number }>)[c]?.processed === n),
    { timeoutMs: deliveryBoundMs, intervalMs: 200, what: `${n} events processed by every consumer` },
  );

describe('the delivery audit flags effects of events the pipeline never committed', () => {
  it('reports each consumer that acted on a forged approval, with the reason, in the status and an alarm, and keeps them', async () => {
    const dir = tempDataDir('pipeline-foreign-');
    dirs.push(dir);
    const lines: string[] = [];
    const options = {
      dataDir: dir,
      port: 0,
      audit: { periodMs: 3_600_000 },
      log: (m: string) => lines.push(m),
    };
    const runtime = await startRuntime(options);
    runtimes.push(runtime);
    const client = pipelineClient(runtime.url);
    const [legitimate] = await client.createAndApprove(1);
    const pending = await client.call<{ taskId: string }>('POST', '/tasks', {
      title: 'still pending',
      assignee: 'ana',
    });

    const forged = await forgeApproval(runtime.bus.endpoint, dir, pending.body.taskId);
    await processedAll(runtime.url, 2);
    const report = await runtime.audit.run();

    expect(report.foreign?.map((f) => [f.consumer, f.eventId, f.subject, f.status]).sort()).toEqual(
      approvedBy.map((c) => [c, forged, pending.body.taskId, 'PROCESSED']).sort(),
    );
    expect(report.foreign?.[0]?.reason).toMatch(/which has no outbox row: the pipeline never committed it/);
    expect(report.foreign?.some((f) => f.subject === legitimate)).toBe(false);
    const status = await client.status();
    expect(status.audit.foreignEffects).toEqual(oneForEachConsumerOfIt);
    expect(status.alarms[alarmIds.foreignEffects]).toBe('ALARM');
    expect(lines.filter((l) => l.includes(`event ${forged}`) && l.includes('no outbox row'))).toHaveLength(
      approvedBy.length,
    );
    expect(existsSync(join(dir, 'foreign-effects.json'))).toBe(true);

    // Kept over a restart; a later run reports nothing new.
    await runtime.stop();
    runtimes.splice(runtimes.indexOf(runtime), 1);
    const again = await startRuntime(options);
    runtimes.push(again);
    expect((await again.audit.run()).foreign).toEqual([]);
    const after = await pipelineClient(again.url).status();
    expect(after.audit.foreignEffects).toEqual(oneForEachConsumerOfIt);
    expect(after.alarms[alarmIds.foreignEffects]).toBe('ALARM');
  }, 600_000);

  it('finds them after a SIGKILL that came before the audit ran (the inbox read again at the next start)', async () => {
    const dir = tempDataDir('pipeline-foreign-killed-');
    dirs.push(dir);
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/runtime-child.ts'], {
      env: {
        ...process.env,
        PIPELINE_DATA_DIR: dir,
        PIPELINE_TEST_RUNTIME: JSON.stringify({ audit: { periodMs: 3_600_000 }, printBus: true }),
      },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let output = '';
    child.stdout?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    child.stderr?.on('data', (c: Buffer) => {
      output += c.toString();
    });
    const started = await waitFor(
      () => /pipeline ready: (\S+) bus: (\S+)/.exec(output),
      (m) => m !== null || child.exitCode !== null,
      { timeoutMs: 240_000, intervalMs: 50, what: 'the child runtime ready' },
    );
    if (!started) throw new Error(`the child runtime did not start:\n${output}`);
    const [, url, bus] = started as unknown as [string, string, string];
    const pending = await pipelineClient(url).call<{ taskId: string }>('POST', '/tasks', {
      title: 'pending',
      assignee: 'ana',
    });
    const forged = await forgeApproval(bus, dir, pending.body.taskId);
    await processedAll(url, 1);
    process.kill(-(child.pid as number), 'SIGKILL');
    await new Promise<void>((ok) =>
      child.exitCode !== null || child.signalCode !== null ? ok() : child.once('exit', () => ok()),
    );
    await clearStaleServer(join(dir, 'postgres'));

    const runtime = await startRuntime({ dataDir: dir, port: 0, audit: { periodMs: 3_600_000 } });
    runtimes.push(runtime);
    const report = await runtime.audit.run();

    expect(report.foreign?.map((f) => f.consumer).sort()).toEqual([...approvedBy].sort());
    expect(report.foreign?.every((f) => f.eventId === forged)).toBe(true);
  }, 600_000);
});
