import type { Migration } from '../migration';
import { functionRoles } from '../roles';

/**
 * `relay_circuit`: the relay's circuit over its transport, one row that every relay run reads
 * before it claims (`shared/outbox/relay-circuit.ts`). Closed while `opened_at` is null. A run
 * whose every published entry failed transiently (the bus or PutEvents refusing everything)
 * opens it; while it is open no run claims, one run at a time probes once `probe_at` has come
 * (`failed_probes` sets the wait before the next), and the probe that is accepted closes it.
 * In the database rather than in a relay's memory: on AWS each run is an invocation of its own.
 * The relay reads and updates it; the ops API reads it for the status.
 */
export const migration0010: Migration = {
  version: 10,
  name: 'relay-circuit',
  statements: [
    `CREATE TABLE relay_circuit (
       id            smallint PRIMARY KEY CHECK (id = 0),
       opened_at     timestamptz,
       probe_at      timestamptz,
       failed_probes integer NOT NULL DEFAULT 0,
       cause         text
     )`,
    'INSERT INTO relay_circuit (id) VALUES (0)',
    `GRANT SELECT, UPDATE (opened_at, probe_at, failed_probes, cause) ON relay_circuit TO ${functionRoles.relay}`,
    `GRANT SELECT ON relay_circuit TO ${functionRoles.ops}`,
  ],
};
