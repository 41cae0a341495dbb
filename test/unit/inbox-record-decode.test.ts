import { describe, expect, it } from 'vitest';
import { decode, type InboxItem, type InboxItemState } from '../../shared/inbox/dynamo-inbox-table';

/** An item as the adapter stores it, its state's fields overridable. */
const item = (state: Partial<InboxItemState>): InboxItem => ({
  pk: 'index#e-1',
  consumer: 'index',
  eventId: 'e-1',
  state: {
    status: 'DEAD',
    attempts: 3,
    leaseOwner: 'me',
    leaseUntil: 5,
    nextAttemptAt: 0,
    payloadHash: 'h',
    eventType: 'content.approved',
    event: '{"id":"b-1"}',
    eventTruncated: false,
    receivedAt: 1,
    updatedAt: 2,
    ...state,
  },
});

describe('an inbox item decoded', () => {
  it('carries the subject it was written with', () => {
    expect(decode(item({ subject: 's-1' })).subject).toBe('s-1');
  });

  it('reads the subject of a record stored without one from the event it kept', () => {
    // Records written before the field had its name: a sandbox's inbox keeps them for their
    // retention, and its dead list still shows whose they are.
    const event = JSON.stringify({ id: 'b-1', detail: { subject: 't-1', data: {} } });
    expect(decode(item({ event })).subject).toBe('t-1');
  });

  it('has no subject when neither it nor a kept event has one', () => {
    expect(decode(item({})).subject).toBeNull();
    expect(decode(item({ event: 'a truncated event', eventTruncated: true })).subject).toBeNull();
  });
});
