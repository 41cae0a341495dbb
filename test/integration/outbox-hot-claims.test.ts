import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SqlClient } from '../../shared/db/sql-client';
import { OutboxStore } from '../../shared/outbox/outbox-store';
import { claimRows, seedPending } from '../support/outbox-fixtures';
import { openTestDatabase } from '../support/sql-adapters';

/** The heap page each row's current version is on. */
async function pages(db: SqlClient): Promise<Map<string, string>> {
  const { rows } = await db.query<{ event_id: string; page: string }>(
    `SELECT event_id::text, (ctid::text::point)[0]::text AS page FROM outbox`,
  );
  return new Map(rows.map((r) => [r.event_id, r.page]));
}

describe('outbox pages', () => {
  let db: SqlClient;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const opened = await openTestDatabase();
    db = opened.db;
    close = opened.close;
  });
  afterAll(() => close());

  it('a claim updates rows in place (heap-only, no new index entries) as far as their page has room', async () => {
    await seedPending(db, 300);
    const before = await pages(db);
    expect(new Set(before.values()).size).toBeGreaterThan(1);

    const claimed = await claimRows(new OutboxStore(db), 'relay-a', 300, 30);
    expect(claimed).toHaveLength(300);

    // A heap-only update keeps the new version on the old one's page. A page left 30% free
    // takes new versions of about 30/70 of its rows within one claim (the old ones are dead only
    // once it commits); a packed page (the default fillfactor, 100) took none, and every claimed
    // row went to another page with a new entry in three indexes.
    const after = await pages(db);
    const stayed = [...before].filter(([id, page]) => after.get(id) === page).length;
    expect(stayed).toBeGreaterThan(claimed.length / 3);
  });
});
