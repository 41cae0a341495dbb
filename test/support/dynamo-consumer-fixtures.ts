import { randomUUID } from 'node:crypto';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import type { EventBridgeEvent } from 'aws-lambda';
import { topology } from '../../functions/topology';
import type { ConsumerContext, ConsumerLogger } from '../../shared/consumers/consumer';
import { type OutboundEvent, toCloudEvent } from '../../shared/events/cloud-event';
import { payloadHash } from '../../shared/inbox/payload-hash';
import type { InboxEvent } from '../../shared/inbox/process-once';
import { type InboxSettings, inboxSettingsFor } from '../../shared/inbox/settings';
import { eventTypes } from '../../shared/topology';

export { deferred } from './gates';

/** The EventBridge event a consumer receives for one outbox row, as the relay and AWS would build it. */
export function busEvent(row: OutboundEvent): EventBridgeEvent<string, Record<string, unknown>> {
  const detail = toCloudEvent(row) as unknown as Record<string, unknown>;
  return {
    version: '0',
    // A new EventBridge id per publish: re-publishes of one outbox row differ only here.
    id: randomUUID(),
    'detail-type': row.eventType,
    source: topology.source,
    account: '123456789012',
    time: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
    region: 'us-east-1',
    resources: [],
    detail,
  };
}

/** A content.approved outbox row; `overrides` changes the payload. */
export function approvedRow(
  options: {
    taskId?: string;
    eventId?: string;
    version?: number;
    title?: string;
    assignee?: string | null;
  } = {},
): OutboundEvent {
  const taskId = options.taskId ?? randomUUID();
  const version = options.version ?? 2;
  return {
    eventId: options.eventId ?? randomUUID(),
    eventType: eventTypes.approved,
    aggregateId: taskId,
    aggregateVersion: version,
    payload: {
      taskId,
      version,
      title: options.title ?? 'Spring launch copy',
      assignee: options.assignee === undefined ? 'ana' : options.assignee,
      reviewer: 'rita',
      approvedAt: '2026-11-30T00:00:00.000Z',
    },
    createdAt: new Date('2026-11-30T00:00:00.000Z'),
  };
}

/** A content.withdrawn outbox row. */
export function withdrawnRow(
  options: { taskId?: string; eventId?: string; version?: number } = {},
): OutboundEvent {
  const taskId = options.taskId ?? randomUUID();
  const version = options.version ?? 3;
  return {
    eventId: options.eventId ?? randomUUID(),
    eventType: eventTypes.withdrawn,
    aggregateId: taskId,
    aggregateVersion: version,
    payload: {
      taskId,
      version,
      title: 'Spring launch copy',
      withdrawnBy: 'wes',
      reason: 'outdated',
      withdrawnAt: '2026-11-30T01:00:00.000Z',
    },
    createdAt: new Date('2026-11-30T01:00:00.000Z'),
  };
}

/** A content.rejected outbox row. */
export function rejectedRow(
  options: { taskId?: string; eventId?: string; reason?: string; assignee?: string | null } = {},
): OutboundEvent {
  const taskId = options.taskId ?? randomUUID();
  return {
    eventId: options.eventId ?? randomUUID(),
    eventType: eventTypes.rejected,
    aggregateId: taskId,
    aggregateVersion: 2,
    payload: {
      taskId,
      version: 2,
      title: 'Spring launch copy',
      assignee: options.assignee === undefined ? 'ana' : options.assignee,
      reviewer: 'rita',
      reason: options.reason ?? 'off brand',
      rejectedAt: '2026-11-30T02:00:00.000Z',
    },
    createdAt: new Date('2026-11-30T02:00:00.000Z'),
  };
}

/** The inbox's view of one delivery of `row` to `consumer`. */
export function inboxEvent(consumer: string, row: OutboundEvent = approvedRow()): InboxEvent {
  const event = busEvent(row);
  return {
    consumer,
    eventId: row.eventId,
    subject: row.aggregateId,
    eventType: row.eventType,
    payloadHash: payloadHash(event.detail),
    event,
  };
}

/** A Lambda-like context; `remainingMs` defaults to a 30 s function with time to spare. */
export function lambdaContext(remainingMs = 30_000, requestId = randomUUID()): ConsumerContext {
  return {
    awsRequestId: requestId,
    functionName: 'consumer-test',
    getRemainingTimeInMillis: () => remainingMs,
  };
}

/** A clock tests move by hand: leases and backoff expire when the test says so. */
export class TestClock {
  constructor(public now = Date.parse('2026-11-30T12:00:00.000Z')) {}
  readonly read = () => this.now;
  advance(ms: number): void {
    this.now += ms;
  }
}

/** Inbox settings with small numbers tests can step through (a minute of transient failures). */
export function testInboxSettings(overrides: Partial<InboxSettings> = {}): InboxSettings {
  return inboxSettingsFor(topology, 'index', {
    maxPermanentAttempts: 3,
    maxEventAgeMs: 60_000,
    backoff: { baseMs: 1_000, maxMs: 4_000 },
    leaseMs: 10_000,
    leaseGraceMs: 1_000,
    ...overrides,
  });
}

/** One recorded log line. */
export interface LogLine {
  readonly level: 'info' | 'warn' | 'error';
  readonly message: string;
  readonly attributes: Record<string, unknown>;
}

/** A logger that keeps every line, so tests can check what was logged with which keys. */
export class RecordingLogger implements ConsumerLogger {
  readonly lines: LogLine[] = [];
  info(message: string, ...extra: unknown[]): void {
    this.lines.push({ level: 'info', message, attributes: merge(extra) });
  }
  warn(message: string, ...extra: unknown[]): void {
    this.lines.push({ level: 'warn', message, attributes: merge(extra) });
  }
  error(message: string, ...extra: unknown[]): void {
    this.lines.push({ level: 'error', message, attributes: merge(extra) });
  }
}

function merge(extra: unknown[]): Record<string, unknown> {
  return Object.assign({}, ...extra.filter((e) => typeof e === 'object' && e !== null));
}

/** What a consumer emitted since the last call: values by metric name (summed), dimensions; then cleared. */
export function takeMetrics(metrics: Metrics): {
  values: Record<string, number>;
  dimensionNames: string[];
  dimensions: Record<string, unknown>;
} {
  const emf = metrics.serializeMetrics() as unknown as Record<string, unknown> & {
    _aws: { CloudWatchMetrics: { Dimensions: string[][]; Metrics: { Name: string }[] }[] };
  };
  const directive = emf._aws.CloudWatchMetrics[0];
  const values: Record<string, number> = {};
  for (const definition of directive?.Metrics ?? []) {
    const v = emf[definition.Name];
    values[definition.Name] = Array.isArray(v) ? v.reduce((a: number, b: number) => a + b, 0) : Number(v);
  }
  const dimensionNames = (directive?.Dimensions ?? []).flat();
  metrics.clearMetrics();
  return { values, dimensionNames, dimensions: Object.fromEntries(dimensionNames.map((d) => [d, emf[d]])) };
}
