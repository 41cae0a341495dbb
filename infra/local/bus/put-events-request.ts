import { randomUUID } from 'node:crypto';
import * as z from 'zod';
import { eventBridgeTime, localBusIdentity } from '../../../shared/events/bus-event';
import type { BusEvent } from './bus-types';

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
export const putEventsRequest = z.object({
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

/** One entry of a PutEvents request, as read from the wire. */
export type PutEventsEntry = NonNullable<z.infer<typeof putEventsRequest>['Entries']>[number];

/** A failed entry of a PutEvents answer, in its place among the results. */
export interface EntryError {
  readonly ErrorCode: string;
  readonly ErrorMessage: string;
}

export const entryError = (code: string, message: string): EntryError => ({
  ErrorCode: code,
  ErrorMessage: message,
});

/** The first thing wrong with an unreadable request, in the words of a serialization error. */
export function serializationMessage(error: z.ZodError): string {
  const issue = error.issues[0];
  const at = issue && issue.path.length > 0 ? issue.path.join('.') : 'the request';
  return `Cannot deserialize ${at}: ${issue?.message ?? 'invalid'}`;
}

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

/**
 * The event EventBridge makes of an entry (a new id, `time` from the entry's `Time` or now, to
 * the second), or the entry's error: a missing Source, DetailType or Detail is InvalidArgument,
 * a Detail that is not a JSON object (or nests too deep) is MalformedDetail.
 */
export function toBusEvent(entry: PutEventsEntry): { event: BusEvent } | { error: EntryError } {
  for (const field of ['Source', 'DetailType', 'Detail'] as const) {
    if (typeof entry[field] !== 'string' || entry[field] === '') {
      return {
        error: entryError(
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
    return { error: entryError('MalformedDetail', 'Detail is malformed.') };
  }
  const time = typeof entry.Time === 'number' ? new Date(entry.Time * 1000) : new Date();
  return {
    event: {
      version: '0',
      id: randomUUID(),
      'detail-type': entry.DetailType as string,
      source: entry.Source as string,
      account: localBusIdentity.account,
      time: eventBridgeTime(time),
      region: localBusIdentity.region,
      resources: entry.Resources ?? [],
      detail: detail as Record<string, unknown>,
    },
  };
}

const utf8 = (v: string | null | undefined) => (v ? Buffer.byteLength(v, 'utf8') : 0);

/** AWS's entry size rule (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-putevent-size.html). */
export function entryBytes(e: PutEventsEntry): number {
  const resources = (e.Resources ?? []).reduce((n, r) => n + utf8(r), 0);
  return (e.Time != null ? 14 : 0) + utf8(e.Source) + utf8(e.DetailType) + utf8(e.Detail) + resources;
}
