/**
 * The event types the pipeline publishes: the CloudEvent `type` (EventBridge `detail-type`) of
 * each, and the bus rule that routes it to the consumers that subscribe to it (the consumer
 * registry, `functions/consumers/registry.ts`, says which).
 */
export const eventTypes = {
  approved: 'content.approved',
  withdrawn: 'content.withdrawn',
  rejected: 'content.rejected',
} as const;

export type EventType = (typeof eventTypes)[keyof typeof eventTypes];

/** Every event type, in the order its rule is listed. */
export const allEventTypes: readonly EventType[] = Object.values(eventTypes);

/** The name of the bus rule that routes `type` (`content.approved` -> `content-approved`). */
export const ruleNameOf = (type: EventType): string => type.replace(/\./g, '-');

/** EventBridge `Source` of every event the pipeline publishes (`topology.source`). */
export const eventSource = 'content.pipeline';
