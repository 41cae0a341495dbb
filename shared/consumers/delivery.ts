import * as z from 'zod';
import { type PipelineCloudEvent, pipelineCloudEvent } from '../events/schemas';
import { payloadHash } from '../inbox/payload-hash';
import type { ConsumerName, Topology } from '../topology';

/**
 * The event a Lambda target receives from EventBridge: the metadata fields every event on a bus
 * carries, with the entry's Detail as the `detail` object
 * (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-events-structure.html). Loose on
 * purpose: replays add `replay-name`, and only the fields we rely on are checked.
 */
export const eventBridgeEnvelope = z.looseObject({
  version: z.string(),
  id: z.string().min(1),
  'detail-type': z.string().min(1),
  source: z.string().min(1),
  account: z.string(),
  time: z.string(),
  region: z.string(),
  resources: z.array(z.string()),
  detail: z.record(z.string(), z.unknown()),
});

/** A delivery that passed every check: the CloudEvent is the contract's, ids agree, routed here. */
export interface ValidDelivery {
  readonly valid: true;
  readonly eventId: string;
  readonly subject: string;
  readonly busEventId: string;
  readonly cloudEvent: PipelineCloudEvent;
  readonly payloadHash: string;
}

/** A delivery that can never succeed, with the best identity the event offers for its record. */
export interface PoisonDelivery {
  readonly valid: false;
  /** The CloudEvent id if it has a string one, else the EventBridge event id, else `unknown`. */
  readonly eventId: string;
  readonly cloudEventId: string | null;
  readonly subject: string | null;
  readonly eventType: string;
  readonly payloadHash: string;
  readonly reason: string;
}

/** What `readDelivery` makes of one invocation's event: run it, or record it as poison. */
export type CheckedDelivery = ValidDelivery | PoisonDelivery;

const issuesText = (error: z.ZodError) =>
  error.issues
    .slice(0, 5)
    .map((i) => `${i.path.map(String).join('.') || '(root)'}: ${i.message}`)
    .join('; ');

const str = (v: unknown, max = 256): string | null =>
  typeof v === 'string' && v.length > 0 && v.length <= max ? v : null;

/**
 * Checks one delivery for `consumer`: EventBridge envelope, pipeline source, CloudEvent schema
 * (zod, the contract's own rules with it), `detail-type` = CloudEvent `type`, an `eventId` in `data`
 * (if any) = `id`, and that a topology rule routes this type to this consumer. A failure of
 * any is poison: retrying cannot fix the event, so it is recorded DEAD, never retried.
 */
export function readDelivery(
  event: unknown,
  consumer: ConsumerName,
  t: Pick<Topology, 'source' | 'rules'>,
): CheckedDelivery {
  const raw = (typeof event === 'object' && event !== null ? event : {}) as Record<string, unknown>;
  const detail = (typeof raw.detail === 'object' && raw.detail !== null ? raw.detail : undefined) as
    | Record<string, unknown>
    | undefined;
  const data = (typeof detail?.data === 'object' && detail.data !== null ? detail.data : {}) as Record<
    string,
    unknown
  >;
  const cloudEventId = str(detail?.id);
  const poison = (reason: string): PoisonDelivery => ({
    valid: false,
    eventId: cloudEventId ?? str(raw.id) ?? 'unknown',
    cloudEventId,
    subject: str(detail?.subject),
    eventType: str(detail?.type, 128) ?? str(raw['detail-type'], 128) ?? 'unknown',
    // The CloudEvent when there is one: a re-publish of the same poison hashes the same.
    payloadHash: payloadHash(detail ?? event ?? null),
    reason,
  });

  const envelope = eventBridgeEnvelope.safeParse(event);
  if (!envelope.success) return poison(`not an EventBridge event: ${issuesText(envelope.error)}`);
  if (envelope.data.source !== t.source) {
    return poison(`source ${envelope.data.source} is not the pipeline's (${t.source})`);
  }
  const parsed = pipelineCloudEvent.safeParse(envelope.data.detail);
  if (!parsed.success) return poison(`detail is not a pipeline CloudEvent: ${issuesText(parsed.error)}`);
  const cloudEvent = parsed.data;
  if (envelope.data['detail-type'] !== cloudEvent.type) {
    return poison(
      `detail-type ${envelope.data['detail-type']} disagrees with CloudEvent type ${cloudEvent.type}`,
    );
  }
  // zod drops unknown keys from `data`; an event id the producer put there must still agree.
  if (data.eventId !== undefined && data.eventId !== cloudEvent.id) {
    // JSON, not String(): an object whose toString is no function makes String() throw, and a
    // throw here would be retried as transient instead of recorded as poison.
    return poison(`id ${cloudEvent.id} disagrees with data.eventId ${JSON.stringify(data.eventId)}`);
  }
  const routed = t.rules.some(
    (r) => r.targets.includes(consumer) && patternTypes(r.pattern).includes(cloudEvent.type),
  );
  if (!routed) return poison(`no rule routes ${cloudEvent.type} to consumer ${consumer}`);
  return {
    valid: true,
    eventId: cloudEvent.id,
    subject: cloudEvent.subject,
    busEventId: envelope.data.id,
    cloudEvent,
    payloadHash: payloadHash(envelope.data.detail),
  };
}

function patternTypes(pattern: Readonly<Record<string, unknown>>): readonly unknown[] {
  const types = pattern['detail-type'];
  return Array.isArray(types) ? types : [];
}
