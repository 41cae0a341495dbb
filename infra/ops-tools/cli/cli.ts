/**
 * The ops CLI (`pipeline …`, or `npx pipeline …`): the local pipeline's tasks API and ops API
 * from a terminal or a script. `bin/pipeline.mjs` calls `runCli` with the real process; tests
 * call it with a fake fetch and in-memory streams, so everything the CLI does goes through `CliIo`.
 *
 * Parsing, per-command help, `--version` and "did you mean" come from commander: it is the
 * smaller of the two usual libraries (no dependencies, one file to load, which keeps `--help`
 * near `node -e 0`), and its subcommands, option conflicts and choices cover every rule this
 * CLI has. yargs would do as well but loads several packages at start.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { CloudFormationClient } from '@aws-sdk/client-cloudformation';
import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { Command, CommanderError, Option } from 'commander';
import { idempotencyKeyHeader } from '../../../shared/http/idempotency-key';
import { uuidPattern } from '../../../shared/ids';
import { CliError, exitCodes, type FetchLike, OpsClient } from './cli-client';

export { nodeHttpFetch } from './cli-client';

import { defaultPort } from '../../../shared/local-port';
import { quietSdkNodeVersionWarning } from '../../../shared/sdk-warnings';
import { consumerNames } from '../trace-view';
import {
  formatAudit,
  formatDeadLetters,
  formatInboxDead,
  formatOutboxDead,
  formatStatus,
  formatTaskList,
  formatTaskTrace,
  inboxEventId,
  narrowWidth,
  num,
  type Paint,
  paint,
} from './cli-format';
import { credentialsFrom, executeApiRegion, sigv4Fetch } from './cli-sigv4';

/** Where `--region` / `--profile` point the AWS clients; unset, the SDK's own chain decides. */
export interface AwsTarget {
  readonly region?: string;
  readonly profile?: string;
}

/**
 * The AWS SDK clients `--stack` needs; tests mock them. Created on demand, so a command that
 * does not name a stack never loads the SDK (loading it costs more than the whole rest of a run).
 */
export interface CliAws {
  cloudFormation(target: AwsTarget): Promise<CloudFormationClient>;
  cloudWatch(target: AwsTarget): Promise<CloudWatchClient>;
}

/** Where the CLI reads and writes; the process's own in `bin/pipeline.mjs`. */
export interface CliIo {
  readonly fetch: FetchLike;
  readonly stdout: { write(chunk: string): unknown; readonly isTTY?: boolean };
  readonly stderr: { write(chunk: string): unknown; readonly isTTY?: boolean };
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Defaults to real clients on the default credential chain. */
  readonly aws?: CliAws;
  /** The pause before retrying a 429 or a 5xx; tests pass one that only records. @default a timer */
  readonly sleep?: (ms: number) => Promise<void>;
}

const clientConfig = (target: AwsTarget) => ({
  ...(target.region === undefined ? {} : { region: target.region }),
  ...(target.profile === undefined ? {} : { profile: target.profile }),
});

// Each factory quiets the SDK's Node-version notice first: the first client built prints it.
const defaultAws: CliAws = {
  cloudFormation: async (target) => {
    quietSdkNodeVersionWarning();
    return new (await import('@aws-sdk/client-cloudformation')).CloudFormationClient(clientConfig(target));
  },
  cloudWatch: async (target) => {
    quietSdkNodeVersionWarning();
    return new (await import('@aws-sdk/client-cloudwatch')).CloudWatchClient(clientConfig(target));
  },
};

/** The SDK's error when neither `--region`, AWS_REGION nor the profile names a region. */
const regionMissing = (err: unknown) => err instanceof Error && /region is missing/i.test(err.message);

const noRegion = () =>
  new CliError(
    'usage',
    'no AWS region for --stack: pass --region <region>, set AWS_REGION, or name a profile with a region (--profile or AWS_PROFILE)',
  );

/**
 * The HTTP client for `url`: requests to a deployed API (`*.execute-api.<region>.amazonaws.com`)
 * are SigV4-signed with credentials from the environment or the default chain (`--profile`).
 */
function clientFor(url: string, io: CliIo, target: AwsTarget): OpsClient {
  const region = executeApiRegion(url);
  // The default credential chain builds SDK clients of its own (STS, SSO).
  if (region) quietSdkNodeVersionWarning();
  const fetch = region ? sigv4Fetch(io.fetch, region, credentialsFrom(io.env, target.profile)) : io.fetch;
  return new OpsClient(url, fetch, { sleep: io.sleep });
}

/** A deployed stack's outputs (CloudFormation DescribeStacks), by output key. */
async function stackOutputs(stack: string, io: CliIo, target: AwsTarget): Promise<Record<string, string>> {
  const client = await (io.aws ?? defaultAws).cloudFormation(target);
  try {
    const { DescribeStacksCommand } = await import('@aws-sdk/client-cloudformation');
    const out = await client.send(new DescribeStacksCommand({ StackName: stack }));
    const found = out.Stacks?.[0];
    if (!found) throw new CliError('request', `stack ${stack} not found`);
    return Object.fromEntries((found.Outputs ?? []).map((o) => [o.OutputKey ?? '', o.OutputValue ?? '']));
  } catch (err) {
    if (err instanceof CliError) throw err;
    if (regionMissing(err)) throw noRegion();
    const e = err as Error;
    throw new CliError('request', `cannot read stack ${stack}: ${e.name}: ${e.message}`, { cause: err });
  } finally {
    client.destroy();
  }
}

/** Every option's parsed value, the global ones included (commander's `optsWithGlobals`). */
interface Values {
  readonly url?: string;
  readonly stack?: string;
  readonly region?: string;
  readonly profile?: string;
  readonly output?: 'table' | 'json';
  readonly json?: boolean;
  readonly wide?: boolean;
  readonly alarm?: string;
  readonly title?: string;
  readonly body?: string;
  readonly assignee?: string;
  readonly reason?: string;
  readonly consumer?: string;
  readonly redrive?: string | true;
  readonly all?: boolean;
  readonly status?: string;
  readonly limit?: string;
  readonly cursor?: string;
}

interface Context {
  readonly client: OpsClient;
  /** The stack `--stack` names, and its outputs. */
  readonly stack?: { readonly name: string; readonly outputs: Readonly<Record<string, string>> };
  readonly target: AwsTarget;
  readonly io: CliIo;
  readonly values: Values;
  readonly args: readonly string[];
  readonly paint: Paint;
  /** 80, or no limit with `--wide`. */
  readonly width: number;
  readonly json: boolean;
}

/** One command of the CLI: its words, what `--help` says of it, and what it does. */
interface CommandSpec {
  readonly words: readonly string[];
  /** What `--help` says it does. */
  readonly summary: string;
  /** Shown under "Example" in the command's own help: one line a user can paste. */
  readonly example: string;
  /** Positional arguments, commander style (`<taskId>`). */
  readonly args?: readonly string[];
  readonly options?: () => readonly Option[];
  /** Needs a deployed stack (`--stack`) rather than any pipeline URL. */
  readonly needsStack?: boolean;
  run(ctx: Context): Promise<void>;
}

// A task id goes into the URL path: anything but a UUID (`..`, `a/b`) could address another route.
function taskIdArg(ctx: Context): string {
  const id = ctx.args[0] ?? '';
  if (!uuidPattern.test(id)) throw new CliError('usage', `task id "${id}" is not a UUID`);
  return id;
}

const print = (ctx: Context, human: string, json: unknown) => {
  ctx.io.stdout.write(ctx.json ? `${JSON.stringify(json, null, 2)}\n` : `${human}\n`);
};

const consumerOption = (required: boolean) => {
  const o = new Option('--consumer <name>', 'the consumer').choices(consumerNames);
  return required ? o.makeOptionMandatory() : o;
};

/** `--redrive <eventId>` and `--all` of the dead lists, which exclude each other. */
const redriveOptions = () => [
  new Option('--redrive <eventId>', 'redrive one entry').conflicts('all'),
  new Option('--all', 'redrive every entry, one at a time, with progress on stderr'),
];

/**
 * `--status` of `tasks list`: the stored names, which every output shows, and `pending`, the
 * short name the tasks API also takes for `pending_review`. Each is sent as typed.
 */
const taskStatuses = ['pending_review', 'pending', 'approved', 'withdrawn', 'rejected'] as const;

const commands: readonly CommandSpec[] = [
  {
    words: ['status'],
    summary: 'task counts, outbox, inboxes, effects, alarms',
    example: 'pipeline status',
    async run(ctx) {
      const status = await ctx.client.get('/ops/status');
      print(ctx, formatStatus(status, ctx.paint, ctx.width), status);
    },
  },
  {
    words: ['tasks', 'create'],
    summary: 'create a task, pending review',
    example: 'pipeline tasks create --title "Spring launch copy" --assignee alice',
    options: () => [
      new Option('--title <t>', 'the title').makeOptionMandatory(),
      new Option('--body <b>', 'the text to review'),
      new Option('--assignee <a>', 'who writes it'),
    ],
    async run(ctx) {
      const { title, body, assignee } = ctx.values;
      // A key of its own for this create, sent again with each of the client's retries: a create
      // answered 503 or 504, or whose answer was lost, and tried again makes one task, not two.
      const created = await ctx.client.post<{ taskId: string; status: string; version: number }>(
        '/tasks',
        {
          title,
          ...(body === undefined ? {} : { body }),
          ...(assignee === undefined ? {} : { assignee }),
        },
        { [idempotencyKeyHeader]: randomUUID() },
      );
      print(ctx, `created task ${created.taskId} (${created.status}, version ${created.version})`, created);
    },
  },
  {
    words: ['tasks', 'approve'],
    summary: 'approve a task as yourself; its event commits with it',
    example: 'pipeline tasks approve "$id"',
    args: ['<taskId>'],
    async run(ctx) {
      const id = taskIdArg(ctx);
      // The reviewer is who signs the request (the IAM principal; locally PIPELINE_CALLER).
      const changed = await ctx.client.post<{ status: string; version: number; eventId: string }>(
        `/tasks/${id}/approve`,
        {},
      );
      print(ctx, `approved task ${id} (version ${changed.version}, event ${changed.eventId})`, changed);
    },
  },
  {
    words: ['tasks', 'withdraw'],
    summary: 'withdraw a task, pending review or approved, as yourself',
    example: 'pipeline tasks withdraw "$id" --reason "legal hold"',
    args: ['<taskId>'],
    options: () => [new Option('--reason <r>', 'why, recorded with the task')],
    async run(ctx) {
      const id = taskIdArg(ctx);
      const { reason } = ctx.values;
      const changed = await ctx.client.post<{ status: string; version: number; eventId: string }>(
        `/tasks/${id}/withdraw`,
        reason === undefined ? {} : { reason },
      );
      print(ctx, `withdrew task ${id} (version ${changed.version}, event ${changed.eventId})`, changed);
    },
  },
  {
    words: ['tasks', 'show'],
    summary: "the task and its trace: its events and each consumer's inbox state for each of them",
    example: 'pipeline tasks show "$id"',
    args: ['<taskId>'],
    async run(ctx) {
      const id = taskIdArg(ctx);
      const task = await ctx.client.get(`/tasks/${id}`);
      const trace = await ctx.client.get(`/ops/tasks/${id}/trace`);
      print(ctx, formatTaskTrace(task, trace, ctx.width), { task, trace });
    },
  },
  {
    words: ['tasks', 'list'],
    summary: 'tasks newest first, a page at a time (a lost id is found here)',
    example: 'pipeline tasks list --status pending_review --limit 5',
    options: () => [
      new Option('--status <s>', 'only tasks in this status (pending is short for pending_review)').choices(
        taskStatuses,
      ),
      new Option('--limit <n>', 'tasks per page, 1 to 100 (default 20)'),
      new Option('--cursor <c>', 'the next page, as the previous one named it'),
    ],
    async run(ctx) {
      const { status, limit, cursor } = ctx.values;
      if (limit !== undefined && !(/^\d+$/.test(limit) && Number(limit) >= 1 && Number(limit) <= 100)) {
        throw new CliError('usage', `--limit "${limit}" is not a whole number from 1 to 100`);
      }
      const query = new URLSearchParams();
      if (status !== undefined) query.set('status', status);
      if (limit !== undefined) query.set('limit', limit);
      if (cursor !== undefined) query.set('cursor', cursor);
      const page = await ctx.client.get(`/tasks${query.size > 0 ? `?${query}` : ''}`);
      print(ctx, formatTaskList(page, ctx.width, status), page);
    },
  },
  {
    words: ['tasks', 'reject'],
    summary: 'reject a task pending review as yourself, with the reason',
    example: 'pipeline tasks reject "$id" --reason "off brand"',
    args: ['<taskId>'],
    options: () => [new Option('--reason <r>', 'why (1 to 1000 characters), recorded').makeOptionMandatory()],
    async run(ctx) {
      const id = taskIdArg(ctx);
      const reason = ctx.values.reason ?? '';
      if (reason.trim() === '' || reason.length > 1000) {
        throw new CliError('usage', '--reason must be 1 to 1000 characters');
      }
      const changed = await ctx.client.post<{ status: string; version: number; eventId: string }>(
        `/tasks/${id}/reject`,
        { reason },
      );
      print(ctx, `rejected task ${id} (version ${changed.version}, event ${changed.eventId})`, changed);
    },
  },
  {
    words: ['outbox', 'dead'],
    summary: 'list (or redrive) dead outbox events',
    example: 'pipeline outbox dead --all',
    options: redriveOptions,
    async run(ctx) {
      // The outbox's event ids are UUIDs: anything else is refused here, as `tasks show` refuses a bad id.
      const { redrive } = ctx.values;
      if (typeof redrive === 'string' && redrive !== '' && !uuidPattern.test(redrive)) {
        throw new CliError('usage', `event id "${redrive}" is not a UUID`);
      }
      await deadList(ctx, {
        noun: 'dead outbox events',
        listPath: '/ops/outbox/dead',
        redrivePath: '/ops/outbox/dead/redrive',
        key: (d) => String((d as { eventId?: unknown }).eventId ?? ''),
        idOf: (d) => String((d as { eventId?: unknown }).eventId ?? ''),
        format: (list) => formatOutboxDead(list, ctx.width),
      });
    },
  },
  {
    words: ['inbox', 'dead'],
    summary: "list (or redrive) a consumer's dead inbox records",
    example: `pipeline inbox dead --consumer ${consumerNames[0]}`,
    options: () => [consumerOption(true), ...redriveOptions()],
    async run(ctx) {
      const consumer = ctx.values.consumer ?? '';
      await deadList(ctx, {
        noun: `dead ${consumer} inbox records`,
        listPath: `/ops/inbox/${consumer}/dead`,
        redrivePath: `/ops/inbox/${consumer}/dead/redrive`,
        key: inboxEventId,
        idOf: inboxEventId,
        format: (list) => formatInboxDead(consumer, list, ctx.width),
      });
    },
  },
  {
    words: ['audit'],
    summary:
      "delivered events missing from a consumer's inbox (the delivery audit's findings); --redrive re-sends them all, --redrive <eventId> one event's",
    example: `pipeline audit --consumer ${consumerNames[0]}`,
    options: () => [
      consumerOption(false),
      new Option('--redrive [eventId]', 're-send every finding, or one event'),
    ],
    async run(ctx) {
      const { consumer } = ctx.values;
      // `--redrive` alone (commander's `true`) re-sends everything.
      const redrive = ctx.values.redrive === true ? '' : ctx.values.redrive;
      if (redrive === undefined) {
        const query = consumer === undefined ? '' : `?consumer=${encodeURIComponent(consumer)}`;
        const listing = await ctx.client.get(`/ops/audit${query}`);
        print(ctx, formatAudit(listing, ctx.width), listing);
        return;
      }
      const later = 'they stay listed until the next audit run finds their records';
      if (redrive !== '') {
        if (!uuidPattern.test(redrive)) throw new CliError('usage', `event id "${redrive}" is not a UUID`);
        const result = await ctx.client.post<{ redriven: number }>('/ops/audit/redrive', {
          eventId: redrive,
          ...(consumer === undefined ? {} : { consumer }),
        });
        print(ctx, `re-sent ${redrive} to ${result.redriven} consumer(s); ${later}`, {
          id: redrive,
          ...result,
        });
        return;
      }
      if (consumer !== undefined) {
        throw new CliError(
          'usage',
          'audit --redrive re-sends every finding; --consumer goes with --redrive <eventId>',
        );
      }
      // A long redrive answers `complete: false` before its deadline: ask again until it is done,
      // each request carrying the first answer's `since`, so that the server re-sends no finding
      // this call re-sent already (without it, findings the audit had not cleared yet were re-sent
      // again by every request once the grace period was over, for as long as the call lasted).
      // A request that moves nothing ends the call: asking again would only repeat it.
      let redriven = 0;
      let skipped = 0;
      let since: string | undefined;
      for (;;) {
        const pass = await ctx.client.post<{
          redriven?: number;
          skipped?: number;
          complete?: boolean;
          since?: string;
        }>('/ops/audit/redrive', since === undefined ? { all: true } : { all: true, since });
        redriven += num(pass.redriven);
        skipped += num(pass.skipped);
        if (pass.complete !== false) break;
        if (num(pass.redriven) + num(pass.skipped) === 0) {
          print(ctx, `re-sent ${redriven} missing deliveries before it stopped`, {
            redriven,
            skipped,
            complete: false,
          });
          throw new CliError(
            'request',
            'the server re-sent nothing more and answered complete: false; run audit --redrive again later',
          );
        }
        since ??= typeof pass.since === 'string' ? pass.since : undefined;
        ctx.io.stderr.write(`re-sent ${redriven} so far\n`);
      }
      const human =
        redriven + skipped === 0
          ? 'nothing to re-send (or all re-sent within the grace period and still on their way)'
          : `re-sent ${redriven} missing deliveries${skipped > 0 ? ` (${skipped} skipped: their events are no longer in the outbox)` : ''}; ${later}`;
      print(ctx, human, { redriven, skipped });
    },
  },
  {
    words: ['alarms', 'test'],
    summary:
      'with --stack: set one alarm to ALARM (default relay-errors) to check that its notification reaches you',
    example: 'pipeline alarms test --stack ContentPipeline-sandbox --region eu-west-1',
    needsStack: true,
    options: () => [new Option('--alarm <name>', 'the alarm, without the stack prefix')],
    async run(ctx) {
      const stack = ctx.stack as NonNullable<Context['stack']>;
      const prefix = stack.outputs.AlarmNamePrefix || `${stack.name}-`;
      // relay-errors goes back to OK at its next one-minute evaluation (missing data is not
      // breaching), so the test also shows the OK notification arriving.
      const wanted = ctx.values.alarm ?? 'relay-errors';
      const cloudWatch = await (ctx.io.aws ?? defaultAws).cloudWatch(ctx.target);
      const { DescribeAlarmsCommand, SetAlarmStateCommand } = await import('@aws-sdk/client-cloudwatch');
      try {
        const found: { name: string; state?: string; missing?: string }[] = [];
        let nextToken: string | undefined;
        do {
          const page = await cloudWatch.send(
            new DescribeAlarmsCommand({ AlarmNamePrefix: prefix, NextToken: nextToken }),
          );
          for (const a of page.MetricAlarms ?? []) {
            if (a.AlarmName)
              found.push({ name: a.AlarmName, state: a.StateValue, missing: a.TreatMissingData });
          }
          nextToken = page.NextToken;
        } while (nextToken);
        const alarm = found.find((a) => a.name === wanted || a.name === `${prefix}${wanted}`);
        if (!alarm) {
          const known = found.map((a) => a.name.slice(prefix.length)).join(', ') || 'none';
          throw new CliError('usage', `no alarm "${wanted}" in stack ${stack.name}; its alarms: ${known}`);
        }
        const set = (state: 'OK' | 'ALARM') =>
          cloudWatch.send(
            new SetAlarmStateCommand({
              AlarmName: alarm.name,
              StateValue: state,
              StateReason: 'pipeline alarms test: checking that alarm notifications reach a person',
            }),
          );
        // CloudWatch notifies on a change of state only: an alarm already in ALARM goes to OK first.
        const wasAlarm = alarm.state === 'ALARM';
        if (wasAlarm) await set('OK');
        await set('ALARM');
        const topic = stack.outputs.AlarmTopicArn;
        const lines = [
          `set ${alarm.name} to ALARM${wasAlarm ? ' (it was in ALARM: set to OK first, so expect an OK email before it)' : ''}.`,
          alarm.missing === 'ignore'
            ? 'Expect an ALARM email within a minute or two. This alarm keeps its state until its next data point, so it may stay in ALARM for a while; set it back with:\n' +
              `  aws cloudwatch set-alarm-state --alarm-name ${alarm.name} --state-value OK --state-reason "alarms test over"`
            : 'Expect an ALARM email within a minute or two, and an OK email when CloudWatch next evaluates it.',
          'No email? Confirm the subscription (the "AWS Notification - Subscription Confirmation" mail), then check whether the notification was sent:',
          `  aws cloudwatch describe-alarm-history --alarm-name ${alarm.name} --history-item-type Action`,
          ...(topic ? [`  aws sns list-subscriptions-by-topic --topic-arn ${topic}`] : []),
        ];
        print(ctx, lines.join('\n'), {
          alarm: alarm.name,
          state: 'ALARM',
          wasAlarm,
          topicArn: topic ?? null,
        });
      } catch (err) {
        if (err instanceof CliError) throw err;
        if (regionMissing(err)) throw noRegion();
        const e = err as Error;
        throw new CliError('request', `alarms test failed: ${e.name}: ${e.message}`, { cause: err });
      } finally {
        cloudWatch.destroy();
      }
    },
  },
  {
    words: ['dead-letters'],
    summary: "list (or redrive) the bus's dead letters",
    example: 'pipeline dead-letters --json',
    options: redriveOptions,
    async run(ctx) {
      const field = (d: unknown, name: string) => String((d as Record<string, unknown>)[name] ?? '');
      await deadList(ctx, {
        noun: 'dead letters',
        listPath: '/ops/dead-letters',
        redrivePath: '/ops/dead-letters/redrive',
        // The same event can be dead for two consumers; each redrive by id takes one of them.
        key: (d) => `${field(d, 'id')} ${field(d, 'consumer')}`,
        idOf: (d) => field(d, 'id'),
        bodyOf: (d) => ({ eventId: field(d, 'id'), consumer: field(d, 'consumer') || undefined }),
        format: (list) => formatDeadLetters(list, ctx.width),
      });
    },
  },
];

interface DeadListSpec {
  readonly noun: string;
  readonly listPath: string;
  readonly redrivePath: string;
  /** Identity of a list entry, so `--all` never redrives one entry twice. */
  readonly key: (entry: unknown) => string;
  /** The id the redrive route takes. */
  readonly idOf: (entry: unknown) => string;
  /** The redrive body for one list entry, when it says more than `{eventId}`. */
  readonly bodyOf?: (entry: unknown) => Record<string, unknown>;
  readonly format: (list: readonly unknown[]) => string;
}

async function deadList(ctx: Context, spec: DeadListSpec): Promise<void> {
  const { all } = ctx.values;
  const redrive = ctx.values.redrive === true ? '' : ctx.values.redrive;
  if (redrive !== undefined) {
    if (redrive === '') throw new CliError('usage', '--redrive needs an id');
    const result = await ctx.client.post<{ redriven: number }>(spec.redrivePath, { eventId: redrive });
    print(ctx, `redrove ${redrive} (${result.redriven} redriven)`, { id: redrive, ...result });
    return;
  }
  if (all) return redriveAll(ctx, spec);
  const list = await ctx.client.get<unknown[]>(spec.listPath);
  print(ctx, spec.format(Array.isArray(list) ? list : []), list);
}

/**
 * `--all`: lists, then redrives one entry at a time so a long redrive shows progress and stops
 * at the first failure with an exact count. Lists again afterwards because a server caps its
 * lists (the outbox's at 500); `seen` keeps an entry that died again from being retried forever.
 * An entry that is gone by the time its turn comes (someone else redrove it), or that the server
 * cannot redrive (409), is skipped and named.
 */
async function redriveAll(ctx: Context, spec: DeadListSpec): Promise<void> {
  const seen = new Set<string>();
  const skipped: string[] = [];
  let redriven = 0;
  let done = 0;
  const progress = progressLine(ctx.io.stderr);
  for (;;) {
    const list = await ctx.client.get<unknown[]>(spec.listPath);
    const fresh = (Array.isArray(list) ? list : []).filter((d) => !seen.has(spec.key(d)));
    if (fresh.length === 0) break;
    for (const d of fresh) seen.add(spec.key(d));
    for (const d of fresh) {
      const id = spec.idOf(d);
      try {
        const body = spec.bodyOf ? spec.bodyOf(d) : { eventId: id };
        const result = await ctx.client.post<{ redriven?: number }>(spec.redrivePath, body);
        redriven += typeof result.redriven === 'number' ? result.redriven : 1;
      } catch (err) {
        // 404: someone else redrove it first; 409: it cannot be redriven (a truncated stored event).
        if (!(err instanceof CliError && (err.status === 404 || err.status === 409))) {
          progress.end();
          ctx.io.stderr.write(`stopped after ${redriven} of ${seen.size} ${spec.noun} redriven\n`);
          throw err;
        }
        skipped.push(id);
      }
      progress.show(++done, seen.size);
    }
  }
  progress.end();
  const human =
    seen.size === 0
      ? `no ${spec.noun} to redrive`
      : `redrove ${redriven} of ${seen.size} ${spec.noun}${skipped.length > 0 ? ` (${skipped.length} skipped, no longer dead or not redrivable: ${skipped.join(', ')})` : ''}`;
  print(ctx, human, { redriven, total: seen.size, skipped });
}

/** "redriving 37/120" on stderr: rewritten in place on a terminal, at most ~20 lines in a log. */
function progressLine(stderr: CliIo['stderr']) {
  let shown = false;
  return {
    show(done: number, total: number) {
      const text = `redriving ${done}/${total}`;
      if (stderr.isTTY) {
        stderr.write(`\r${text}`);
        shown = true;
      } else if (done === total || done % Math.max(1, Math.ceil(total / 20)) === 0) {
        stderr.write(`${text}\n`);
      }
    },
    end() {
      if (shown) stderr.write('\n');
      shown = false;
    },
  };
}

function baseUrl(raw: string | undefined, env: CliIo['env']): string {
  if (raw === undefined) {
    // Read as `npm start` reads it: blank is unset.
    const port = env.PORT?.trim() || String(defaultPort);
    if (!/^\d+$/.test(port) || Number(port) < 1 || Number(port) > 65535) {
      throw new CliError('usage', `PORT=${port} is not a TCP port; set PORT or pass --url`);
    }
    raw = `http://127.0.0.1:${port}`;
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError('usage', `--url "${raw}" is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliError('usage', `--url "${raw}" is not an http(s) URL`);
  }
  return url.href.replace(/\/+$/, '');
}

/** The project's version, from the package.json above this file (source or built bundle). */
function packageVersion(): string {
  for (const up of ['../../../package.json', '../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'content-pipeline' && pkg.version) return pkg.version;
    } catch {
      // Not this one: the source and the bundle sit at different depths.
    }
  }
  return 'unknown';
}

/** The global options: where the requests go, and how the answer is shown. */
const globalOptions = () => [
  new Option(
    '--url <url>',
    `the pipeline's base URL (default http://127.0.0.1:$PORT, PORT defaulting to ${defaultPort})`,
  ).conflicts('stack'),
  new Option('--stack <name>', 'a deployed stack: its API URL from CloudFormation, requests SigV4-signed'),
  new Option('--region <region>', "with --stack: the AWS region (default AWS_REGION or the profile's)"),
  new Option('--profile <name>', 'with --stack: the AWS profile (default AWS_PROFILE)'),
  new Option('-o, --output <format>', 'table (fits 80 columns) or json (one JSON document)').choices([
    'table',
    'json',
  ]),
  new Option('--json', 'the same as -o json'),
  new Option('--wide', 'tables as wide as their content, one line per row'),
];

const epilogue = `
Exit status: 0 done; 1 the server refused or failed the request (or could not
be reached); 2 bad arguments or settings, nothing sent.`;

/** A commander message as this CLI words every error: `pipeline: <what>`, lower case, one line. */
function errorLine(message: string): string {
  const text = message
    .replace(/^error: /, '')
    .replace(/\.?\s*\n\(Did you mean (.*)\?\)\s*$/s, ' (did you mean $1?)')
    .replace(/\s*\n\s*/g, ' ')
    .trim();
  return `pipeline: ${text}\n`;
}

// Each command's help names the global options in one line; `pipeline --help` explains them.
const globalHint =
  '\nGlobal options: --url, --stack (with --region, --profile), -o json, --wide;\nsee `pipeline --help`.';

const helpHint = (name: string) => `Run \`${name} --help\` for usage.\n`;

/** What parsing found to do: a command to run, or the arguments `help <command…>` stands for. */
interface Parsed {
  spec?: CommandSpec;
  args?: string[];
  values?: Values;
  path?: string;
  helpArgv?: string[];
}

/**
 * The arguments `help <words>` stands for: `<words> --help` when the words name a command or a
 * group, so both print the same; otherwise the words up to the first unknown one, which commander
 * then refuses as it refuses any unknown command (with its "did you mean"). A word after a
 * command that has no subcommands is refused here, since parsing it would run that command.
 */
function helpArgv(program: Command, words: readonly string[]): string[] {
  let command = program;
  for (const [i, word] of words.entries()) {
    const sub = command.commands.find((c) => c.name() === word);
    if (!sub) {
      if (command.commands.length === 0) {
        command.error(`unknown command '${word}'`, {
          exitCode: exitCodes.usage,
          code: 'commander.unknownCommand',
        });
      }
      return words.slice(0, i + 1);
    }
    command = sub;
  }
  return [...words, '--help'];
}

/**
 * The commander program: one subcommand per `CommandSpec` (groups such as `tasks` hold theirs),
 * each with its own help and example. Output goes through `io`; errors throw (exitOverride).
 */
function buildProgram(io: CliIo, ran: Parsed) {
  const program = new Command('pipeline');
  const output = (name: string) => ({
    writeOut: (s: string) => void io.stdout.write(s),
    writeErr: (s: string) => void io.stderr.write(s),
    outputError: (s: string, write: (s: string) => void) => {
      write(errorLine(s));
      write(helpHint(name));
    },
  });
  const configure = (command: Command, name: string) =>
    command
      .exitOverride()
      .configureOutput(output(name))
      .configureHelp({ helpWidth: narrowWidth })
      .showSuggestionAfterError(true);
  configure(program, 'pipeline')
    .description(
      "Operates the local pipeline started by `npm start`, through its HTTP API. With --stack (a deployed stack, e.g. ContentPipeline-sandbox), every command goes to that stack's API, found from its outputs and SigV4-signed with your AWS credentials.",
    )
    .version(packageVersion(), '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help (also after any command)')
    // Commander's own help command reads one word (`help tasks approve` would show `tasks`):
    // `help [command...]` below takes them all.
    .helpCommand(false)
    .addHelpText(
      'after',
      `${epilogue}\n\nExample:\n  pipeline tasks create --title "Spring launch copy" -o json`,
    );
  for (const option of globalOptions()) program.addOption(option);
  const groups = new Map<string, Command>();
  for (const spec of commands) {
    let parent = program;
    for (const word of spec.words.slice(0, -1)) {
      let group = groups.get(word);
      if (!group) {
        group = configure(parent.command(word), `pipeline ${word}`)
          .description(`${word} commands`)
          .helpCommand(false);
        groups.set(word, group);
      }
      parent = group;
    }
    const name = `pipeline ${spec.words.join(' ')}`;
    const sub = configure(parent.command(spec.words.at(-1) as string), name)
      .description(spec.summary)
      .addHelpText('after', `\nExample:\n  ${spec.example}\n${globalHint}`);
    for (const arg of spec.args ?? []) sub.argument(arg);
    for (const option of spec.options?.() ?? []) sub.addOption(option);
    sub.action((...params: unknown[]) => {
      const command = params.at(-1) as Command;
      ran.spec = spec;
      ran.path = name;
      ran.args = params.slice(0, (spec.args ?? []).length) as string[];
      ran.values = command.optsWithGlobals<Values>();
    });
  }
  // Group descriptions name their commands, so `pipeline --help` shows what each holds.
  for (const [word, group] of groups) {
    group.description(`${word} ${group.commands.map((c) => c.name()).join('|')}`);
  }
  configure(program.command('help'), 'pipeline help')
    .description("show a command's help, as --help after it does")
    .argument('[command...]')
    .action((words: string[]) => {
      ran.helpArgv = helpArgv(program, words);
    });
  return program;
}

/** The command table, for the tests that check each command's help. */
export const cliCommands: readonly Pick<CommandSpec, 'words' | 'args' | 'summary' | 'example'>[] = commands;

/**
 * Runs one CLI invocation and returns its exit status; never throws and never exits the process,
 * so tests can drive it. Errors go to stderr as one `pipeline: …` line (and a usage hint for
 * exit 2). Exit 0 done, 1 the server refused or failed, 2 usage (nothing was sent).
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  const ran: Parsed = {};
  try {
    await buildProgram(io, ran).parseAsync([...argv], { from: 'user' });
  } catch (err) {
    if (err instanceof CommanderError) {
      // --help and --version end here too, with exit code 0; a group without its subcommand
      // printed its help on stderr (exit code 1 in commander), which is a usage error here.
      return err.exitCode === 0 ? 0 : exitCodes.usage;
    }
    return reportUnexpected(io, err);
  }
  // `help <command…>` is that command's `--help`, parsed anew (it ends there: no second `help`).
  if (ran.helpArgv) return runCli(ran.helpArgv, io);
  const { spec, values = {}, path = 'pipeline' } = ran;
  if (!spec) return 0;
  try {
    await execute(spec, values, ran.args ?? [], io);
    return 0;
  } catch (err) {
    if (err instanceof CliError) {
      io.stderr.write(`pipeline: ${err.message}\n`);
      if (err.code === 'usage') io.stderr.write(helpHint(path));
      return exitCodes[err.code];
    }
    return reportUnexpected(io, err);
  }
}

async function execute(spec: CommandSpec, values: Values, args: readonly string[], io: CliIo): Promise<void> {
  const name = spec.words.join(' ');
  if (values.stack === undefined && (values.region !== undefined || values.profile !== undefined)) {
    throw new CliError('usage', '--region and --profile go with --stack <name>');
  }
  if (spec.needsStack && values.stack === undefined) {
    throw new CliError(
      'usage',
      `${name} needs --stack <name> (a deployed stack, e.g. ContentPipeline-sandbox)`,
    );
  }
  const target: AwsTarget = { region: values.region, profile: values.profile };
  let stack: Context['stack'];
  let url: string;
  if (values.stack !== undefined) {
    if (!/^[A-Za-z][A-Za-z0-9-]{0,127}$/.test(values.stack)) {
      throw new CliError('usage', `--stack "${values.stack}" is not a CloudFormation stack name`);
    }
    const outputs = await stackOutputs(values.stack, io, target);
    if (!outputs.ApiUrl) throw new CliError('request', `stack ${values.stack} has no ApiUrl output`);
    stack = { name: values.stack, outputs };
    url = baseUrl(outputs.ApiUrl, io.env);
  } else {
    url = baseUrl(values.url, io.env);
  }
  const json = values.json === true || values.output === 'json';
  const color = io.stdout.isTTY === true && !json && (io.env.NO_COLOR ?? '') === '';
  await spec.run({
    client: clientFor(url, io, target),
    stack,
    target,
    io,
    values,
    args,
    paint: paint(color),
    width: values.wide ? Number.POSITIVE_INFINITY : narrowWidth,
    json,
  });
}

// A bug, not a user error: show the stack so it can be reported.
function reportUnexpected(io: CliIo, err: unknown): number {
  io.stderr.write(
    `pipeline: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  return 1;
}
