import type { Migration } from '../migration';
import { migration0001 } from './0001-tasks-and-outbox';
import { migration0002 } from './0002-function-roles';
import { migration0003 } from './0003-outbox-column-grants';
import { migration0004 } from './0004-outbox-unsettled-claims';
import { migration0005 } from './0005-tasks-api-reads-its-event';
import { migration0006 } from './0006-outbox-room-for-hot-claims';
import { migration0007 } from './0007-reads-bounded-by-work';
import { migration0008 } from './0008-delivery-audit';
import { migration0009 } from './0009-task-listing-and-rejection';
import { migration0010 } from './0010-relay-circuit';
import { migration0011 } from './0011-task-idempotency-keys';

/**
 * Every migration, in version order. Append only: never edit one that has shipped. This list is
 * the one module that imports a migration; code that needs a fact a migration also uses (a
 * role's name) reads it from its own module, as the migration does.
 */
export const migrations: readonly Migration[] = [
  migration0001,
  migration0002,
  migration0003,
  migration0004,
  migration0005,
  migration0006,
  migration0007,
  migration0008,
  migration0009,
  migration0010,
  migration0011,
];
