import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { removeLocalPostgres } from '../../infra/local/postgres';
import { type Runtime, startRuntime } from '../../infra/local/runtime';
import { dynamoClient } from '../support/dynamo';
import { pipelineClient, tempDataDir } from '../support/pipeline-client';

/**
 * Issue 32: another OS user of the machine, against a running pipeline, gets in nowhere.
 * Before, as `nobody`: PostgreSQL took `postgres` / `pipeline` as superuser (and `COPY … TO
 * PROGRAM 'id'` ran a command as the `postgres` OS user), the bus took a forged unsigned
 * `content.approved` for a task still pending review (a notification, an archive object and an
 * index document followed), dynalite took any write, and the tasks and ops APIs took approvals
 * and redrives, recorded under the runtime's user.
 *
 * The intruder is a separate process run as `nobody` (test/support/intruder.mjs); it needs root
 * to become another user, so elsewhere the test is skipped, saying why.
 */

const repo = resolve(import.meta.dirname, '../..');
const asRoot = process.getuid?.() === 0;
if (!asRoot) {
  console.warn('[owner-only] skipped: becoming another OS user (nobody) needs root; CI runs this as root');
}

type Outcome = {
  readonly succeeded: boolean;
  readonly value?: { status?: number; body?: string } & Record<string, unknown>;
  readonly error?: string;
  readonly code?: string;
};

/** Runs the intruder as `nobody` against `target`; resolves with what each door answered. */
function intrude(target: Record<string, unknown>): Promise<Record<string, Outcome> & { uid: number }> {
  return new Promise((ok, fail) => {
    const child = spawn(
      'setpriv',
      [
        '--reuid=nobody',
        '--regid=nogroup',
        '--clear-groups',
        process.execPath,
        join(repo, 'test/support/intruder.mjs'),
        JSON.stringify(target),
      ],
      { cwd: repo, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' } },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString();
    });
    child.once('error', fail);
    child.once('exit', (code) => {
      if (code !== 0) return fail(new Error(`the intruder exited (${code}): ${err}`));
      try {
        ok(JSON.parse(out));
      } catch {
        fail(new Error(`the intruder printed no JSON: ${out} ${err}`));
      }
    });
  });
}

const bodyOf = (o: Outcome) => JSON.parse(o.value?.body ?? '{}') as Record<string, unknown>;

describe.skipIf(!asRoot)('another OS user (nobody) against a running pipeline', () => {
  let runtime: Runtime;
  let dir: string;

  beforeAll(async () => {
    dir = tempDataDir('pipeline-owner-only-');
    runtime = await startRuntime({ dataDir: dir, port: 0 });
  }, 240_000);
  afterAll(async () => {
    await runtime?.stop();
    await removeLocalPostgres(join(dir, 'postgres'));
    rmSync(dir, { recursive: true, force: true });
  });

  it('is refused by PostgreSQL, the bus, the DynamoDB engine and every write route, and changes nothing', async () => {
    const client = pipelineClient(runtime.url);
    const created = await client.call<{ taskId: string }>('POST', '/tasks', {
      title: 'pending',
      assignee: 'ana',
    });
    expect(created.status).toBe(201);
    const taskId = created.body.taskId;
    const before = {
      task: (await client.call('GET', `/tasks/${taskId}`)).body,
      bus: { ...runtime.bus.counters },
      effects: await runtime.consumers.countEffects(),
      tasks: (await client.status()).tasks,
    };

    const seen = await intrude({
      pgPort: runtime.postgres.port,
      bus: runtime.bus.endpoint,
      dynamo: runtime.consumers.dynamo.endpoint,
      http: runtime.url,
      taskId,
      busName: topology.busName,
      source: topology.source,
      credentialsFile: runtime.credentials.file,
    });

    expect(seen.uid).toBe(65534);
    // The data directory's credentials are its owner's alone.
    expect(seen.credentialsFile).toMatchObject({ succeeded: false, code: 'EACCES' });
    // PostgreSQL: no fixed password, so no superuser and no COPY … TO PROGRAM.
    expect(seen.postgres).toMatchObject({ succeeded: false, code: '28P01' });
    // The bus: unsigned, and signed with credentials of its own.
    expect(seen.busUnsigned?.value?.status).toBe(403);
    expect(bodyOf(seen.busUnsigned as Outcome).__type).toBe('MissingAuthenticationTokenException');
    expect(seen.busWronglySigned).toMatchObject({ succeeded: false, error: 'UnrecognizedClientException' });
    // The DynamoDB engine, likewise.
    expect(seen.dynamoUnsigned?.value?.status).toBe(400);
    expect(bodyOf(seen.dynamoUnsigned as Outcome).__type).toMatch(/#MissingAuthenticationTokenException$/);
    expect(seen.dynamoWronglySigned).toMatchObject({
      succeeded: false,
      error: 'UnrecognizedClientException',
    });
    // The tasks and ops APIs take no write of another user's; reads stay open.
    for (const route of ['approve', 'create', 'redrive']) {
      expect(seen[route]?.value?.status, route).toBe(403);
      expect(String(bodyOf(seen[route] as Outcome).error), route).toContain(
        'this request came from uid 65534',
      );
    }
    expect(seen.read?.value?.status).toBe(200);

    // Nothing changed: the task is as it was, the bus took nothing, no effect happened.
    expect((await client.call('GET', `/tasks/${taskId}`)).body).toEqual(before.task);
    expect(runtime.bus.counters).toEqual(before.bus);
    expect(await runtime.consumers.countEffects()).toEqual(before.effects);
    expect((await client.status()).tasks).toEqual(before.tasks);
    const index = dynamoClient(runtime.consumers.dynamo.endpoint, runtime.credentials.aws);
    try {
      const doc = await index.send(
        new GetItemCommand({
          TableName: 'content-pipeline-content-index',
          Key: { taskId: { S: taskId } },
          ConsistentRead: true,
        }),
      );
      expect(doc.Item).toBeUndefined();
    } finally {
      index.destroy();
    }
  }, 240_000);
});
