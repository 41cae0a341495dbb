/**
 * The ops CLI (`npx pipeline …`): the local pipeline's tasks API and ops API from a terminal or
 * a script. `bin/pipeline.mjs` calls `runCli` with the real process; tests call it with a fake
 * fetch and in-memory streams, so everything the CLI does goes through `CliIo`.
 */
import { parseArgs } from 'node:util';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { CloudWatchClient, DescribeAlarmsCommand, SetAlarmStateCommand } from '@aws-sdk/client-cloudwatch';
import { uuidPattern } from '../../shared/ids';
import { CliError, exitCodes, type FetchLike, OpsClient } from './cli-client';
import {
  formatAudit,
  formatDeadLetters,
  formatInboxDead,
  formatOutboxDead,
  formatStatus,
  formatTaskTrace,
  inboxEventId,
  num,
  type Paint,
  paint,
} from './cli-format';
import { credentialsFrom, executeApiRegion, sigv4Fetch } from './cli-sigv4';
import { consumerNames } from './cli-trace';
import { defaultPort } from './start-environment';

/** The AWS SDK clients `--stack` needs (default credential chain and region); tests mock them. */
export interface CliAws {
  cloudFormation(): CloudFormationClient;
  cloudWatch(): CloudWatchClient;
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

const defaultAws: CliAws = {
  cloudFormation: () => new CloudFormationClient({}),
  cloudWatch: () => new CloudWatchClient({}),
};

/**
 * The HTTP client for `url`: requests to a deployed API (`*.execute-api.<region>.amazonaws.com`)
 * are SigV4-signed with credentials from the environment or the default chain.
 */
function clientFor(url: string, io: CliIo): OpsClient {
  const region = executeApiRegion(url);
  return new OpsClient(url, region ? sigv4Fetch(io.fetch, region, credentialsFrom(io.env)) : io.fetch, {
    sleep: io.sleep,
  });
}

/** A deployed stack's outputs (CloudFormation DescribeStacks), by output key. */
async function stackOutputs(stack: string, io: CliIo): Promise<Record<string, string>> {
  const client = (io.aws ?? defaultAws).cloudFormation();
  try {
    const out = await client.send(new DescribeStacksCommand({ StackName: stack }));
    const found = out.Stacks?.[0];
    if (!found) throw new CliError('request', `stack ${stack} not found`);
    return Object.fromEntries((found.Outputs ?? []).map((o) => [o.OutputKey ?? '', o.OutputValue ?? '']));
  } catch (err) {
    if (err instanceof CliError) throw err;
    const e = err as Error;
    throw new CliError('request', `cannot read stack ${stack}: ${e.name}: ${e.message}`, { cause: err });
  } finally {
    client.destroy();
  }
}

const optionSpec = {
  url: { type: 'string' },
  stack: { type: 'string' },
  alarm: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  title: { type: 'string' },
  body: { type: 'string' },
  assignee: { type: 'string' },
  reason: { type: 'string' },
  consumer: { type: 'string' },
  redrive: { type: 'string' },
  all: { type: 'boolean' },
} as const;

type OptionName = keyof typeof optionSpec;
type Values = { [K in OptionName]?: (typeof optionSpec)[K]['type'] extends 'string' ? string : boolean };

/** What `--help` says of each option: its argument's placeholder (string options) and, for the global ones, a line. */
const optionHelp: Record<OptionName, { readonly arg?: string; readonly help?: string }> = {
  url: {
    arg: 'url',
    help: "the pipeline's base URL (default\nhttp://127.0.0.1:$PORT, PORT defaulting to 3000)",
  },
  stack: { arg: 'name', help: 'a deployed stack: its API URL from\nCloudFormation, requests SigV4-signed' },
  json: { help: 'print one JSON document on stdout\ninstead of tables' },
  help: { help: 'show this help' },
  alarm: { arg: 'name' },
  title: { arg: 't' },
  body: { arg: 'b' },
  assignee: { arg: 'a' },
  reason: { arg: 'r' },
  consumer: { arg: consumerNames.join('|') },
  redrive: { arg: 'eventId' },
  all: {},
};

const globalOptions: readonly OptionName[] = ['stack', 'url', 'json', 'help'];

interface Context {
  readonly client: OpsClient;
  /** The stack `--stack` names, and its outputs. */
  readonly stack?: { readonly name: string; readonly outputs: Readonly<Record<string, string>> };
  readonly io: CliIo;
  readonly values: Values;
  readonly args: readonly string[];
  readonly paint: Paint;
}

interface Command {
  readonly words: readonly string[];
  /** What `--help` says it does; `\n` starts a continuation line. */
  readonly summary: string;
  /** Options of which at most one may be given, shown as `[--a <x> | --b]`. */
  readonly oneOf?: readonly OptionName[];
  /** String options whose value may be left out (`--redrive` alone), shown as `--a [<x>]`: the value is then ''. */
  readonly valueOptional?: readonly OptionName[];
  /** Needs a deployed stack (`--stack`) rather than any pipeline URL. */
  readonly needsStack?: boolean;
  /** Names of the positional arguments after the command words. */
  readonly positionals: readonly string[];
  readonly options: readonly OptionName[];
  readonly required?: readonly OptionName[];
  run(ctx: Context): Promise<void>;
}

// A task id goes into the URL path: anything but a UUID (`..`, `a/b`) could address another route.
function taskIdArg(ctx: Context): string {
  const id = ctx.args[0] ?? '';
  if (!uuidPattern.test(id)) throw new CliError('usage', `task id "${id}" is not a UUID`);
  return id;
}

const print = (ctx: Context, human: string, json: unknown) => {
  ctx.io.stdout.write(ctx.values.json ? `${JSON.stringify(json, null, 2)}\n` : `${human}\n`);
};

const commands: readonly Command[] = [
  {
    words: ['status'],
    summary: 'task counts, outbox, inboxes, effects, alarms',
    positionals: [],
    options: [],
    async run(ctx) {
      const status = await ctx.client.get('/ops/status');
      print(ctx, formatStatus(status, ctx.paint), status);
    },
  },
  {
    words: ['tasks', 'create'],
    summary: 'create a task, pending review',
    positionals: [],
    options: ['title', 'body', 'assignee'],
    required: ['title'],
    async run(ctx) {
      const { title, body, assignee } = ctx.values;
      const created = await ctx.client.post<{ taskId: string; status: string; version: number }>('/tasks', {
        title,
        ...(body === undefined ? {} : { body }),
        ...(assignee === undefined ? {} : { assignee }),
      });
      print(ctx, `created task ${created.taskId} (${created.status}, version ${created.version})`, created);
    },
  },
  {
    words: ['tasks', 'approve'],
    summary: 'approve a task as yourself; its event commits with it',
    positionals: ['taskId'],
    options: [],
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
    summary: 'withdraw an approved task as yourself',
    positionals: ['taskId'],
    options: ['reason'],
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
    summary: "the task and its trace: its events and each\nconsumer's inbox state for each of them",
    positionals: ['taskId'],
    options: [],
    async run(ctx) {
      const id = taskIdArg(ctx);
      const task = await ctx.client.get(`/tasks/${id}`);
      const trace = await ctx.client.get(`/ops/tasks/${id}/trace`);
      print(ctx, formatTaskTrace(task, trace), { task, trace });
    },
  },
  {
    words: ['outbox', 'dead'],
    summary: 'list (or redrive) dead outbox events',
    positionals: [],
    options: ['redrive', 'all'],
    oneOf: ['redrive', 'all'],
    async run(ctx) {
      await deadList(ctx, {
        noun: 'dead outbox events',
        listPath: '/ops/outbox/dead',
        redrivePath: '/ops/outbox/dead/redrive',
        key: (d) => String((d as { eventId?: unknown }).eventId ?? ''),
        idOf: (d) => String((d as { eventId?: unknown }).eventId ?? ''),
        format: formatOutboxDead,
      });
    },
  },
  {
    words: ['inbox', 'dead'],
    summary: "list (or redrive) a consumer's dead inbox records",
    positionals: [],
    options: ['consumer', 'redrive', 'all'],
    oneOf: ['redrive', 'all'],
    required: ['consumer'],
    async run(ctx) {
      const consumer = ctx.values.consumer ?? '';
      if (!(consumerNames as string[]).includes(consumer)) {
        throw new CliError('usage', `unknown consumer "${consumer}"; one of ${consumerNames.join(', ')}`);
      }
      await deadList(ctx, {
        noun: `dead ${consumer} inbox records`,
        listPath: `/ops/inbox/${consumer}/dead`,
        redrivePath: `/ops/inbox/${consumer}/dead/redrive`,
        key: inboxEventId,
        idOf: inboxEventId,
        format: (list) => formatInboxDead(consumer, list),
      });
    },
  },
  {
    words: ['audit'],
    summary:
      "delivered events missing from a consumer's inbox\n(the delivery audit's findings); --redrive\nre-sends them all, --redrive <eventId> one event's",
    positionals: [],
    options: ['consumer', 'redrive'],
    valueOptional: ['redrive'],
    async run(ctx) {
      const { consumer, redrive } = ctx.values;
      if (consumer !== undefined && !(consumerNames as string[]).includes(consumer)) {
        throw new CliError('usage', `unknown consumer "${consumer}"; one of ${consumerNames.join(', ')}`);
      }
      if (redrive === undefined) {
        const query = consumer === undefined ? '' : `?consumer=${encodeURIComponent(consumer)}`;
        const listing = await ctx.client.get(`/ops/audit${query}`);
        print(ctx, formatAudit(listing), listing);
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
      // A long redrive answers `complete: false` before its deadline: ask again until it is done.
      let redriven = 0;
      let skipped = 0;
      for (;;) {
        const pass = await ctx.client.post<{ redriven?: number; skipped?: number; complete?: boolean }>(
          '/ops/audit/redrive',
          { all: true },
        );
        redriven += num(pass.redriven);
        skipped += num(pass.skipped);
        if (pass.complete !== false) break;
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
      'with --stack: set one alarm to ALARM\n(default relay-errors) to check that its\nnotification reaches you',
    needsStack: true,
    positionals: [],
    options: ['alarm'],
    async run(ctx) {
      const stack = ctx.stack as NonNullable<Context['stack']>;
      const prefix = stack.outputs.AlarmNamePrefix || `${stack.name}-`;
      // relay-errors goes back to OK at its next one-minute evaluation (missing data is not
      // breaching), so the test also shows the OK notification arriving.
      const wanted = ctx.values.alarm ?? 'relay-errors';
      const cloudWatch = (ctx.io.aws ?? defaultAws).cloudWatch();
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
    positionals: [],
    options: ['redrive', 'all'],
    oneOf: ['redrive', 'all'],
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
        format: formatDeadLetters,
      });
    },
  },
];

/** One option as a command line shows it: `--title <t>`, `--redrive [<id>]` when the value may be left out, or `--all` for a flag. */
function optionUsage(option: OptionName, valueOptional = false): string {
  const arg = optionHelp[option].arg;
  if (arg === undefined) return `--${option}`;
  return valueOptional ? `--${option} [<${arg}>]` : `--${option} <${arg}>`;
}

/** A command's line in `--help`: its words, positionals, required options, then the optional ones. */
export function commandUsage(command: Command): string {
  const required = command.required ?? [];
  const oneOf = command.oneOf ?? [];
  const usageOf = (o: OptionName) => optionUsage(o, command.valueOptional?.includes(o) ?? false);
  const parts = [
    ...command.words,
    ...command.positionals.map((p) => `<${p}>`),
    ...required.map(usageOf),
    ...command.options
      .filter((o) => !required.includes(o) && !oneOf.includes(o))
      .map((o) => `[${usageOf(o)}]`),
  ];
  if (oneOf.length > 0) parts.push(`[${oneOf.map(usageOf).join(' | ')}]`);
  return parts.join(' ');
}

/**
 * The `--help` text, generated from the command table and the option list, so it cannot name
 * a command or an option the CLI does not take (a test checks both ways).
 */
function renderUsage(): string {
  const column = 47;
  const indent = ' '.repeat(column);
  const pad = (left: string, text: string) => {
    const [first = '', ...rest] = text.split('\n');
    const head = left.length < column - 1 ? `${left.padEnd(column)}${first}` : `${left}\n${indent}${first}`;
    return [head, ...rest.map((line) => `${indent}${line}`)].join('\n');
  };
  const commandLines = commands.map((c) => pad(`  ${commandUsage(c)}`, c.summary));
  const optionLines = globalOptions.map((o) =>
    pad(`  ${o === 'help' ? '-h, ' : ''}${optionUsage(o)}`, optionHelp[o].help ?? ''),
  );
  return `Usage: pipeline <command> [options]

Operates the local pipeline started by \`npm start\`, through its HTTP API. With --stack (a
deployed stack, e.g. ContentPipeline-sandbox), every command goes to that stack's API, found
from its outputs and SigV4-signed with your AWS credentials (environment or default chain).

Commands:
${commandLines.join('\n')}

Options:
${optionLines.join('\n')}

--all redrives one id at a time, with progress on stderr.
Exit status: 0 done; 1 the request failed (pipeline unreachable, 4xx, 5xx); 2 bad arguments.
`;
}

/** The `--help` text. */
export const usage = renderUsage();

/** The command table, for the test that checks `--help` against it. */
export const cliCommands: readonly Pick<Command, 'words' | 'positionals' | 'options' | 'required'>[] =
  commands;

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
  const { redrive, all } = ctx.values;
  if (redrive !== undefined && all) throw new CliError('usage', '--redrive and --all exclude each other');
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

function baseUrl(values: Values, env: CliIo['env']): string {
  let raw = values.url;
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

/** Options that may stand alone (`audit --redrive`): given so, their value is ''. */
const valueOptional: ReadonlySet<string> = new Set(
  commands.flatMap((c) => (c.valueOptional ?? []).map((o) => `--${o}`)),
);

function parse(argv: readonly string[]): { values: Values; positionals: string[] } {
  // `--redrive` last or before another option: parseArgs would call its value missing.
  const args = argv.map((a, i) =>
    valueOptional.has(a) && (i === argv.length - 1 || argv[i + 1]?.startsWith('-')) ? `${a}=` : a,
  );
  try {
    const { values, positionals } = parseArgs({
      args,
      options: optionSpec,
      allowPositionals: true,
      strict: true,
    });
    return { values: values as Values, positionals };
  } catch (err) {
    // parseArgs' messages name the option; its hint about '--' does not apply to this CLI.
    const message = (err as Error).message.replace(/\s*To specify a positional argument.*$/s, '');
    throw new CliError('usage', message, { cause: err });
  }
}

function findCommand(positionals: readonly string[]): Command {
  const command = commands.find((c) => c.words.every((w, i) => positionals[i] === w));
  if (command) return command;
  const [first, second] = positionals;
  if (first === undefined) throw new CliError('usage', 'no command given');
  const group = commands.filter((c) => c.words[0] === first && c.words.length > 1);
  if (group.length > 0) {
    const subs = group.map((c) => c.words[1]).join(', ');
    throw new CliError(
      'usage',
      second === undefined
        ? `${first}: which one? ${subs}`
        : `unknown command "${first} ${second}"; ${first} commands: ${subs}`,
    );
  }
  throw new CliError('usage', `unknown command "${first}"`);
}

/**
 * Runs one CLI invocation and returns its exit status; never throws and never exits the process,
 * so tests can drive it. Errors go to stderr as one clear message.
 */
export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  try {
    const { values, positionals } = parse(argv);
    if (values.help || positionals[0] === 'help') {
      io.stdout.write(usage);
      return 0;
    }
    const command = findCommand(positionals);
    const args = positionals.slice(command.words.length);
    const name = command.words.join(' ');
    if (args.length !== command.positionals.length) {
      const expected = command.positionals.map((p) => `<${p}>`).join(' ');
      throw new CliError(
        'usage',
        args.length > command.positionals.length
          ? `${name}: unexpected argument "${args[command.positionals.length]}"`
          : `${name}: missing ${expected}`,
      );
    }
    for (const option of Object.keys(values) as OptionName[]) {
      if (!globalOptions.includes(option) && !command.options.includes(option)) {
        throw new CliError('usage', `${name} does not take --${option}`);
      }
    }
    for (const option of command.required ?? []) {
      if (values[option] === undefined) throw new CliError('usage', `${name} needs --${option}`);
    }
    if (values.stack !== undefined && values.url !== undefined) {
      throw new CliError('usage', '--stack and --url exclude each other');
    }
    if (command.needsStack && values.stack === undefined) {
      throw new CliError(
        'usage',
        `${name} needs --stack <name> (a deployed stack, e.g. ContentPipeline-sandbox)`,
      );
    }
    let stack: Context['stack'];
    let url: string;
    if (values.stack !== undefined) {
      if (!/^[A-Za-z][A-Za-z0-9-]{0,127}$/.test(values.stack)) {
        throw new CliError('usage', `--stack "${values.stack}" is not a CloudFormation stack name`);
      }
      const outputs = await stackOutputs(values.stack, io);
      if (!outputs.ApiUrl) throw new CliError('request', `stack ${values.stack} has no ApiUrl output`);
      stack = { name: values.stack, outputs };
      url = baseUrl({ url: outputs.ApiUrl }, io.env);
    } else {
      url = baseUrl(values, io.env);
    }
    const color = io.stdout.isTTY === true && !values.json && (io.env.NO_COLOR ?? '') === '';
    await command.run({ client: clientFor(url, io), stack, io, values, args, paint: paint(color) });
    return 0;
  } catch (err) {
    if (err instanceof CliError) {
      io.stderr.write(`pipeline: ${err.message}\n`);
      if (err.code === 'usage') io.stderr.write('Run `pipeline --help` for usage.\n');
      return exitCodes[err.code];
    }
    // A bug, not a user error: show the stack so it can be reported.
    io.stderr.write(
      `pipeline: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    return 1;
  }
}
