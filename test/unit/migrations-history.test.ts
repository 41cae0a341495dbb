import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Migration } from '../../shared/db/migration';
import { migrations } from '../../shared/db/migrations/index';

// A migration that has been applied is history: a database that recorded its version never runs
// it again, so an edit to its statements splits the fleet into databases built one way and
// databases built the other. The statements are built from constants that live outside the
// migration (the role names in shared/db/roles.ts), so an edit there reaches them too. Each
// applied migration's statements are pinned here by their SHA-256, as Flyway keeps a checksum
// of each applied script in its schema history table and fails validation when one changes:
// https://documentation.red-gate.com/fd/flyway-schema-history-table-273973417.html

/** The name and the statements' digest of every migration, as it was applied. */
const applied: Record<number, readonly [name: string, sha256: string]> = {
  1: ['tasks-and-outbox', '74545a27d47a2acef012b387c41e0679715f101d61e9fe9030000478d91ff810'],
  2: ['function-roles', 'e221beac9cd8e383d02b985c6aaa74bbcf8df42d7ef51fc7040c491acf2af3ef'],
  3: ['outbox-column-grants', '735709d00c69224ba2729bb630903c2214ab4854eca923a76bbdd6bb327d8c39'],
  4: ['outbox-unsettled-claims', '1ed94532faa7b0a79fbb65233f1f126522320eed79b74cacafa1a871cdec83e4'],
  5: ['tasks-api-reads-its-event', 'e94b6aab0041a49fd525d9699320e4772fa70b011ddc8f9cd153ab284fd637bf'],
  6: ['outbox-room-for-hot-claims', '399104741c799ef2a2eede0a737eca6409be0b789329ceae798f09219eab1874'],
  7: ['reads-bounded-by-work', '046443dd85be2e9e10522dba9a1ced0f781691902b07d8e03fd9113b1c160ccd'],
  8: ['delivery-audit', '90b9fb4ce7428b30cfc8f4705de12e5c800ce765e76c0ed1fcf52399f19f3362'],
  9: ['task-listing-and-rejection', 'a53d28db949f664e81f4284d8c71b56479f87af003f7aa2999c08f38cfff50dd'],
  10: ['relay-circuit', '173a870c9ae96e7ab0957becea5604d196be07350f416f0f7fe01771edae1d60'],
  11: ['task-idempotency-keys', '77f0b0203d3cda9eee094112f89c0e019afc3bd594cd62be78a5b06b05e7b8e2'],
};

const digest = (m: Migration) => createHash('sha256').update(JSON.stringify(m.statements)).digest('hex');

describe('the migrations', () => {
  it('keep every applied migration’s name and statements as they were applied', () => {
    const changed = Object.entries(applied).flatMap(([version, [name, sha256]]) => {
      const now = migrations.find((m) => m.version === Number(version));
      if (!now) return [`${version} (${name}) is missing from the list`];
      if (now.name !== name) return [`${version} is named ${now.name}, was applied as ${name}`];
      return digest(now) === sha256
        ? []
        : [`${version} (${name}) has other statements than it was applied with`];
    });

    expect(changed, `applied migrations changed:\n${changed.join('\n')}`).toEqual([]);
  });

  it('pin every migration in the list, so the next edit to one is caught', () => {
    const unpinned = migrations
      .filter((m) => !(m.version in applied))
      .map((m) => `${m.version}: ['${m.name}', '${digest(m)}'],`);

    expect(unpinned, `pin these in \`applied\` above:\n${unpinned.join('\n')}`).toEqual([]);
  });
});
