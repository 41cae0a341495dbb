import { randomUUID } from 'node:crypto';
import {
  appendFileSync,
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import * as z from 'zod';
import { sleep } from '../../shared/db/retry';
import type { DeadLetter as OpsDeadLetter } from '../../shared/ops/ops-ports';
import type { ConsumerName, RuleSpec } from '../../shared/topology';
import { assertValidRules, matchesPattern } from './event-pattern';
import type { FaultInjector } from './faults';
import { answerClientErrorsAsJson, BodyTooLargeError, readBody, sendAndClose } from './http-guard';

/** The event a Lambda target receives from EventBridge (reference/eventbridge.md §3). */
export interface BusEvent {
  readonly version: '0';
  readonly id: string;
  readonly 'detail-type': string;
  readonly source: string;
  readonly account: string;
  readonly time: string;
  readonly region: string;
  readonly resources: string[];
  readonly detail: Record<string, unknown>;
}

/** How the bus retries one target before dead-lettering (the Lambda async-invoke policy, locally). */
export interface TargetRetry {
  readonly maxAttempts: number;
  readonly baseMs: number;
  readonly maxMs: number;
  readonly maxAgeMs: number;
}

/** A dead letter of the local bus: the ops API's `DeadLetter`, with the event as the bus keeps it. */
export interface DeadLetter extends Omit<OpsDeadLetter, 'event'> {
  readonly event: BusEvent;
}

export interface LocalBusOptions {
  readonly busName: string;
  readonly rules: readonly RuleSpec[];
  /** Invokes a consumer the way Lambda would; a throw is a failed invocation. */
  readonly invoke: (consumer: ConsumerName, event: BusEvent) => Promise<unknown>;
  readonly retry: (consumer: ConsumerName) => TargetRetry;
  /** Where the journal and the dead letters live; survives restarts. */
  readonly dir: string;
  readonly maxRequestBytes: number;
  readonly faults: FaultInjector;
  /** Invocations in flight per consumer (Lambda's reserved concurrency, locally). */
  readonly concurrency?: number;
  readonly log?: (message: string, extra?: Record<string, unknown>) => void;
  readonly random?: () => number;
}

interface Delivery {
  readonly event: BusEvent;
  readonly rule: string;
  readonly consumer: ConsumerName;
  readonly firstAttemptAt: number;
}

type JournalLine =
  | { t: 'event'; event: BusEvent; targets: { rule: string; consumer: ConsumerName }[] }
  | { t: 'done'; id: string; consumer: ConsumerName; rule: string };

const nonRetryable = (code: string, message: string) => ({ ErrorCode: code, ErrorMessage: message });

// A JavaScript Date spans ±8.64e15 ms; an epoch-seconds `Time` outside it names no instant.
const maxEpochSeconds = 8.64e12;

// awsJson reads a null member as an absent one.
const member = <T extends z.ZodType>(type: T) => type.nullish();

/**
 * A PutEvents request as the wire must carry it: every member of its JSON type (unknown members
 * ignored, as AWS JSON services do). A body that does not fit cannot be read at all, and AWS
 * answers it as a whole (SerializationException); which members an entry needs and whether its
 * Detail is an object are answered per entry (InvalidArgument, MalformedDetail).
 * https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEventsRequestEntry.html
 */
const putEventsRequest = z.object({
  Entries: member(
    z.array(
      z.object({
        Source: member(z.string()),
        DetailType: member(z.string()),
        Detail: member(z.string()),
        EventBusName: member(z.string()),
        Resources: member(z.array(z.string())),
        TraceHeader: member(z.string()),
        // awsJson timestamps are epoch seconds (a JSON number, fractions allowed).
        Time: member(z.number().min(-maxEpochSeconds).max(maxEpochSeconds)),
      }),
    ),
  ),
  EndpointId: member(z.string()),
});
type PutEventsEntry = NonNullable<z.infer<typeof putEventsRequest>['Entries']>[number];

/**
 * How deep a Detail may nest: "PutEvents will only process nested JSON up to 1000 levels deep"
 * (https://docs.aws.amazon.com/eventbridge/latest/APIReference/API_PutEvents.html). Deeper is
 * answered as MalformedDetail; beyond it the journal's JSON.stringify would overflow the stack.
 */
const maxDetailDepth = 1000;

/** Whether the JSON text nests objects and arrays deeper than `max` (read without recursion). */
function nestsDeeperThan(json: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{' || c === '[') {
      if (++depth > max) return true;
    } else if (c === '}' || c === ']') depth--;
  }
  return false;
}

/** The first thing wrong with an unreadable request, in the words of a serialization error. */
function serializationMessage(error: z.ZodError): string {
  const issue = error.issues[0];
  const at = issue && issue.path.length > 0 ? issue.path.join('.') : 'the request';
  return `Cannot deserialize ${at}: ${issue?.message ?? 'invalid'}`;
}

/**
 * A local EventBridge custom bus: a `PutEvents` endpoint (awsJson1.1) on loopback that the
 * real `@aws-sdk/client-eventbridge` client talks to, the topology's rules, and per-target
 * delivery with retries and a dead-letter store.
 *
 * Durability invariant: an entry answered with an `EventId` is in the fsync'ed journal first,
 * and each (event, target) leaves the journal only once the target succeeded or was
 * dead-lettered. A crash or SIGKILL therefore loses nothing the relay marked delivered: the
 * next start re-delivers what was pending (at least once, as EventBridge itself does).
 */
export class LocalBus {
  private server: Server | undefined;
  private journalFd: number | undefined;
  private stopping = false;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly waiting = new Map<ConsumerName, (() => void)[]>();
  private readonly running = new Map<ConsumerName, number>();
  private readonly dead: DeadLetter[] = [];
  private readonly journalPath: string;
  private readonly deadPath: string;
  readonly counters = { accepted: 0, rejected: 0, delivered: 0, retried: 0, deadLettered: 0 };
  endpoint = '';

  constructor(private readonly options: LocalBusOptions) {
    this.journalPath = join(options.dir, 'journal.jsonl');
    this.deadPath = join(options.dir, 'dead-letters.jsonl');
  }

  /** Opens the journal, re-delivers what a previous run left pending, and starts listening. */
  async start(): Promise<string> {
    // A rule EventBridge would refuse (PutRule: InvalidEventPatternException) stops the bus before it creates anything.
    assertValidRules(this.options.rules);
    mkdirSync(this.options.dir, { recursive: true });
    const pending = this.recover();
    this.journalFd = openSync(this.journalPath, 'a');
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err) =>
        this.reply(res, 500, { __type: 'InternalFailure', message: String(err) }),
      );
    });
    answerClientErrorsAsJson(this.server, (_status, message) => ({
      __type: 'SerializationException',
      message,
    }));
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    const { port } = this.server.address() as AddressInfo;
    this.endpoint = `http://127.0.0.1:${port}`;
    for (const d of pending) this.schedule(d);
    if (pending.length > 0)
      this.log('re-delivering events pending from the last run', { deliveries: pending.length });
    return this.endpoint;
  }

  /** Stops accepting; waits up to `drainMs` for invocations in flight; the rest stays journalled. */
  async stop(drainMs = 5_000): Promise<void> {
    this.stopping = true;
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    this.server?.closeAllConnections?.();
    await Promise.race([Promise.allSettled([...this.inFlight]), sleep(drainMs)]);
    for (const release of [...this.waiting.values()].flat()) release();
    if (this.journalFd !== undefined) closeSync(this.journalFd);
    this.journalFd = undefined;
  }

  /** Dead letters, oldest first (this run's and earlier runs'). */
  deadLetters(): readonly DeadLetter[] {
    return this.dead;
  }

  /** Deliveries not yet finished (in flight or waiting for a retry). */
  get pendingDeliveries(): number {
    return this.inFlight.size;
  }

  /** Puts a dead letter back on the bus for its target; false when there is none with that id. */
  redrive(id: string, consumer?: ConsumerName): boolean {
    const index = this.dead.findIndex((d) => d.id === id && (!consumer || d.consumer === consumer));
    const letter = this.dead[index];
    if (!letter) return false;
    // Journal the redelivery (fsync) before forgetting the letter: a crash between the two
    // writes then leaves a duplicate, never a loss.
    this.journal(
      [{ t: 'event', event: letter.event, targets: [{ rule: letter.rule, consumer: letter.consumer }] }],
      true,
    );
    this.dead.splice(index, 1);
    this.rewriteDeadLetters();
    this.schedule({
      event: letter.event,
      rule: letter.rule,
      consumer: letter.consumer,
      firstAttemptAt: Date.now(),
    });
    return true;
  }

  /** Delivers a stored event to one consumer again (an inbox redrive), journalled like any other. */
  redeliver(consumer: ConsumerName, event: BusEvent): void {
    const rule = 'redrive';
    this.journal([{ t: 'event', event, targets: [{ rule, consumer }] }], true);
    this.schedule({ event, rule, consumer, firstAttemptAt: Date.now() });
  }

  // --- PutEvents -------------------------------------------------------------------------

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw: Buffer;
    try {
      raw = await readBody(req, this.maxBodyBytes());
    } catch (err) {
      if (!(err instanceof BodyTooLargeError)) throw err;
      return sendAndClose(
        res,
        413,
        { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-errortype': 'RequestEntityTooLarge' },
        JSON.stringify({
          __type: 'RequestEntityTooLarge',
          message: `Request body is larger than ${err.maxBytes} bytes.`,
        }),
      );
    }
    const target = String(req.headers['x-amz-target'] ?? '');
    if (req.method !== 'POST' || target !== 'AWSEvents.PutEvents') {
      return this.reply(res, 400, {
        __type: 'UnknownOperationException',
        message: `unsupported: ${target || req.method}`,
      });
    }
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      return this.reply(res, 400, { __type: 'SerializationException', message: 'body is not JSON' });
    }
    const request = putEventsRequest.safeParse(body);
    if (!request.success) {
      return this.reply(res, 400, {
        __type: 'SerializationException',
        message: serializationMessage(request.error),
      });
    }
    const entries = request.data.Entries;
    if (!entries) {
      return this.reply(res, 400, {
        __type: 'ValidationException',
        message: `1 validation error detected: Value null at 'entries' failed to satisfy constraint: Member must not be null`,
      });
    }
    if (entries.length < 1 || entries.length > 10) {
      return this.reply(res, 400, {
        __type: 'ValidationException',
        message: `1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length ${entries.length < 1 ? 'greater than or equal to 1' : 'less than or equal to 10'}`,
      });
    }
    const total = entries.reduce((n, e) => n + entryBytes(e), 0);
    if (total > this.options.maxRequestBytes) {
      return this.reply(res, 400, {
        __type: 'ValidationException',
        message: 'Total size of the entries in the request is over the limit.',
      });
    }
    const results: Record<string, string>[] = [];
    const lines: JournalLine[] = [];
    const deliveries: Delivery[] = [];
    for (const entry of entries) {
      const outcome = this.accept(entry);
      if ('error' in outcome) {
        results.push(outcome.error);
        continue;
      }
      const { event, targets } = outcome;
      if (this.options.faults.strikes('busReject')) {
        results.push(nonRetryable('InternalFailure', 'injected fault: busReject'));
        continue;
      }
      if (targets.length > 0) lines.push({ t: 'event', event, targets });
      const copies = this.options.faults.strikes('busDuplicate') ? 2 : 1;
      for (let i = 0; i < copies; i++) {
        for (const t of targets) deliveries.push({ event, ...t, firstAttemptAt: Date.now() });
      }
      results.push(
        this.options.faults.strikes('busAckLoss')
          ? nonRetryable('InternalFailure', 'injected fault: busAckLoss (the event was delivered)')
          : { EventId: event.id },
      );
    }
    // Journal (fsync) before answering: an EventId is a promise the event will be delivered.
    this.journal(lines, true);
    for (const d of deliveries) this.schedule(d);
    const failed = results.filter((r) => 'ErrorCode' in r).length;
    this.counters.accepted += results.length - failed;
    this.counters.rejected += failed;
    this.reply(res, 200, { FailedEntryCount: failed, Entries: results });
  }

  private accept(
    entry: PutEventsEntry,
  ):
    | { error: Record<string, string> }
    | { event: BusEvent; targets: { rule: string; consumer: ConsumerName }[] } {
    for (const field of ['Source', 'DetailType', 'Detail'] as const) {
      if (typeof entry[field] !== 'string' || entry[field] === '') {
        return {
          error: nonRetryable(
            'InvalidArgument',
            `Parameter ${field} is not valid. Reason: ${field} is a required argument.`,
          ),
        };
      }
    }
    let detail: unknown;
    try {
      detail = nestsDeeperThan(entry.Detail as string, maxDetailDepth)
        ? undefined
        : JSON.parse(entry.Detail as string);
    } catch {
      detail = undefined;
    }
    if (typeof detail !== 'object' || detail === null || Array.isArray(detail)) {
      return { error: nonRetryable('MalformedDetail', 'Detail is malformed.') };
    }
    const time = typeof entry.Time === 'number' ? new Date(entry.Time * 1000) : new Date();
    const event: BusEvent = {
      version: '0',
      id: randomUUID(),
      'detail-type': entry.DetailType as string,
      source: entry.Source as string,
      account: '000000000000',
      time: `${time.toISOString().slice(0, 19)}Z`,
      region: 'us-east-1',
      resources: entry.Resources ?? [],
      detail: detail as Record<string, unknown>,
    };
    const bus = typeof entry.EventBusName === 'string' ? entry.EventBusName : 'default';
    // AWS accepts an entry for a bus that does not exist and drops it; so do we, loudly.
    if (bus !== this.options.busName && !bus.endsWith(`:event-bus/${this.options.busName}`)) {
      this.log('entry for an unknown bus accepted and dropped, as AWS does', { bus });
      return { event, targets: [] };
    }
    const targets = this.options.rules
      .filter((r) => matchesPattern(r.pattern, event))
      .flatMap((r) => r.targets.map((consumer) => ({ rule: r.name, consumer })));
    return { event, targets };
  }

  /**
   * The most body bytes a PutEvents request can need: the entries' size limit, with every
   * character escaped in the JSON (at most 6 bytes for one), and room for the envelope.
   */
  private maxBodyBytes(): number {
    return this.options.maxRequestBytes * 6 + 64 * 1024;
  }

  private reply(res: ServerResponse, status: number, body: unknown): void {
    const payload = JSON.stringify(body);
    const headers: Record<string, string> = {
      'content-type': 'application/x-amz-json-1.1',
      'x-amzn-requestid': randomUUID(),
    };
    const type = (body as { __type?: string }).__type;
    if (type) headers['x-amzn-errortype'] = type;
    res.writeHead(status, headers).end(payload);
  }

  // --- delivery ---------------------------------------------------------------------------

  private schedule(delivery: Delivery): void {
    const task = this.deliver(delivery).finally(() => this.inFlight.delete(task));
    this.inFlight.add(task);
  }

  private async deliver(d: Delivery): Promise<void> {
    const policy = this.options.retry(d.consumer);
    const random = this.options.random ?? Math.random;
    for (let attempt = 1; !this.stopping; attempt++) {
      let error: unknown;
      await this.acquire(d.consumer);
      if (this.stopping) return this.release(d.consumer);
      try {
        await this.options.invoke(d.consumer, d.event);
        this.counters.delivered++;
        this.journal([{ t: 'done', id: d.event.id, consumer: d.consumer, rule: d.rule }], false);
        return;
      } catch (err) {
        error = err;
      } finally {
        this.release(d.consumer);
      }
      const age = Date.now() - d.firstAttemptAt;
      if (attempt >= policy.maxAttempts || age >= policy.maxAgeMs) {
        return this.deadLetter(d, attempt, error);
      }
      // Retries are routine (a duplicate in flight, a backoff, an injected fault): counted, not logged.
      this.counters.retried++;
      // The ceiling of the consumer's own backoff, so a retry never lands before the inbox would take it.
      const ceiling = Math.min(policy.maxMs, policy.baseMs * 2 ** (attempt - 1));
      await sleep(ceiling + Math.floor(random() * policy.baseMs));
    }
  }

  private deadLetter(d: Delivery, attempts: number, error: unknown): void {
    const letter: DeadLetter = {
      id: d.event.id,
      consumer: d.consumer,
      rule: d.rule,
      attempts,
      error: error instanceof Error ? `${error.name}: ${error.message}` : String(error),
      deadAt: new Date().toISOString(),
      event: d.event,
    };
    this.dead.push(letter);
    this.counters.deadLettered++;
    appendFileSync(this.deadPath, `${JSON.stringify(letter)}\n`);
    this.journal([{ t: 'done', id: d.event.id, consumer: d.consumer, rule: d.rule }], false);
    this.log('target dead-lettered', {
      consumer: d.consumer,
      eventId: d.event.id,
      attempts,
      error: letter.error,
    });
  }

  private async acquire(consumer: ConsumerName): Promise<void> {
    const limit = this.options.concurrency ?? 8;
    if ((this.running.get(consumer) ?? 0) < limit) {
      this.running.set(consumer, (this.running.get(consumer) ?? 0) + 1);
      return;
    }
    await new Promise<void>((resolve) => {
      const queue = this.waiting.get(consumer) ?? [];
      queue.push(resolve);
      this.waiting.set(consumer, queue);
    });
  }

  private release(consumer: ConsumerName): void {
    const next = this.waiting.get(consumer)?.shift();
    if (next)
      next(); // the slot passes straight to the next waiter
    else this.running.set(consumer, Math.max(0, (this.running.get(consumer) ?? 1) - 1));
  }

  // --- journal ----------------------------------------------------------------------------

  private journal(lines: readonly JournalLine[], durable: boolean): void {
    if (lines.length === 0 || this.journalFd === undefined) return;
    appendFileSync(this.journalFd, lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
    if (durable) fsyncSync(this.journalFd);
  }

  /** Reads the journal and dead letters, compacts the journal to what is still pending. */
  private recover(): Delivery[] {
    if (existsSync(this.deadPath)) {
      let torn = false;
      for (const line of readFileSync(this.deadPath, 'utf8').split('\n')) {
        if (!line.trim()) continue;
        try {
          this.dead.push(JSON.parse(line) as DeadLetter);
        } catch {
          // A line torn by a crash mid-append: rewrite the file without it below, or the next
          // append would glue a good letter onto the fragment and lose it on the next read.
          torn = true;
        }
      }
      if (torn) this.rewriteDeadLetters();
    }
    if (!existsSync(this.journalPath)) return [];
    const open = new Map<
      string,
      { event: BusEvent; targets: Map<string, { rule: string; consumer: ConsumerName }> }
    >();
    for (const line of readFileSync(this.journalPath, 'utf8').split('\n')) {
      if (!line.trim()) continue;
      let entry: JournalLine;
      try {
        entry = JSON.parse(line) as JournalLine;
      } catch {
        continue; // a torn last line from a crash mid-append: its entry was never answered
      }
      if (entry.t === 'event') {
        const existing = open.get(entry.event.id) ?? { event: entry.event, targets: new Map() };
        for (const t of entry.targets) existing.targets.set(`${t.rule}/${t.consumer}`, t);
        open.set(entry.event.id, existing);
      } else {
        const existing = open.get(entry.id);
        existing?.targets.delete(`${entry.rule}/${entry.consumer}`);
        if (existing && existing.targets.size === 0) open.delete(entry.id);
      }
    }
    const pending: Delivery[] = [];
    const compacted: string[] = [];
    for (const { event, targets } of open.values()) {
      compacted.push(
        JSON.stringify({ t: 'event', event, targets: [...targets.values()] } satisfies JournalLine),
      );
      for (const t of targets.values()) pending.push({ event, ...t, firstAttemptAt: Date.now() });
    }
    // Durable before it replaces the old journal: a crash right after a restart must not lose pending deliveries.
    const tmp = `${this.journalPath}.tmp`;
    const fd = openSync(tmp, 'w');
    try {
      writeFileSync(fd, compacted.map((l) => `${l}\n`).join(''));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.journalPath);
    return pending;
  }

  private rewriteDeadLetters(): void {
    const tmp = `${this.deadPath}.tmp`;
    const fd = openSync(tmp, 'w');
    try {
      writeFileSync(fd, this.dead.map((d) => `${JSON.stringify(d)}\n`).join(''));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.deadPath);
  }

  private log(message: string, extra?: Record<string, unknown>): void {
    this.options.log?.(message, extra);
  }
}

const utf8 = (v: string | null | undefined) => (v ? Buffer.byteLength(v, 'utf8') : 0);

/** AWS's entry size rule (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html). */
function entryBytes(e: PutEventsEntry): number {
  const resources = (e.Resources ?? []).reduce((n, r) => n + utf8(r), 0);
  return (e.Time != null ? 14 : 0) + utf8(e.Source) + utf8(e.DetailType) + utf8(e.Detail) + resources;
}
