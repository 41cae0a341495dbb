import { describe, expect, it } from 'vitest';
import { allEventTypes } from '../../shared/events/event-types';
import { eventPayloads, payloadSql, pipelineCloudEvent } from '../../shared/events/schemas';

// Each event's payload is declared once (`eventPayloads`): the outbox statement's SQL and the
// contract's zod schema are both made from it. This holds every event type there is, with no
// line per type: a type added to event-types.ts without a payload fails here.
describe('each event’s payload, declared once', () => {
  it('builds in SQL exactly the fields its zod contract parses, for every event type', () => {
    for (const type of allEventTypes) {
      const declared = Object.keys(eventPayloads[type]);
      const sql = payloadSql(type);
      expect(sql, type).toMatch(/^jsonb_build_object\(/);
      const built = [...sql.matchAll(/(?:\(|, )'(\w+)', /g)].map((m) => m[1]);
      expect(built, type).toEqual(declared);
      // The contract of the type (the CloudEvent's `data` for it) names the same fields.
      const option = pipelineCloudEvent.options.find((o) => o.shape.type.value === type);
      expect(Object.keys(option?.shape.data.shape ?? {}), type).toEqual(declared);
    }
  });
});
