import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, constants, fstatSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as z from 'zod';
import { localBusIdentity } from '../../shared/events/bus-event';
import { writeJsonDurably } from './postgres-data-location';
import type { LocalAwsCredentials } from './sigv4-verifier.mjs';

export type { LocalAwsCredentials } from './sigv4-verifier.mjs';

/**
 * The secrets of one data directory, made by its first start and kept by it, readable by its
 * owner alone (0600): PostgreSQL's superuser password and the access key every local AWS-like
 * endpoint (the bus's PutEvents, the DynamoDB engine) verifies SigV4 signatures with. Nothing
 * is fixed in the code, so another OS user on the machine can neither guess nor read them; the
 * runtime's own clients, the CLI and the tests read them from here, so nobody types them.
 */
export interface LocalCredentials {
  readonly file: string;
  readonly postgres: { readonly superuserPassword: string };
  readonly aws: LocalAwsCredentials;
}

/** Where a data directory keeps its credentials. */
export const credentialsFile = (dataDir: string): string => join(dataDir, 'credentials.json');

/** The Region the local endpoints' credential scope names (the local bus's, as its events say). */
export const localRegion = localBusIdentity.region;

const stored = z.object({
  postgres: z.object({ superuserPassword: z.string().min(16) }).optional(),
  aws: z.object({ accessKeyId: z.string().min(16), secretAccessKey: z.string().min(32) }).optional(),
});

/** 20 characters of A-Z and 2-7 (RFC 4648 base32), as AWS's own access key ids look. */
function accessKeyId(): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  return `LKIA${[...randomBytes(16)].map((b) => alphabet[b % 32]).join('')}`;
}

/** Fresh secrets: crypto-random, printable ASCII (a SCRAM password and a SigV4 secret alike). */
const fresh = () => ({
  postgres: { superuserPassword: randomBytes(24).toString('base64url') },
  aws: { accessKeyId: accessKeyId(), secretAccessKey: randomBytes(30).toString('base64url') },
});

/**
 * Reads `file` without following a symlink, as this user's own file: refuses one another user
 * owns (it could have chosen the secrets), and makes one others can read 0600 again (saying so).
 */
function readOwn(file: string, log: (message: string) => void): unknown {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') throw new Error(`${file} is a symlink: refusing to read credentials through it`);
    throw err;
  }
  try {
    const stat = fstatSync(fd);
    const me = process.getuid?.();
    if (me !== undefined && stat.uid !== me) {
      throw new Error(
        `${file} is owned by uid ${stat.uid}, not by this user (uid ${me}): refusing its credentials; remove it and start again`,
      );
    }
    if ((stat.mode & 0o077) !== 0) {
      chmodSync(file, 0o600);
      log(
        `${file} was readable by others (mode 0${(stat.mode & 0o777).toString(8)}): made 0600 again; anyone who read it meanwhile knows the local engines' credentials`,
      );
    }
    return JSON.parse(readFileSync(fd, 'utf8'));
  } catch (err) {
    if (err instanceof SyntaxError)
      throw new Error(`${file} is not JSON: restore it, or see docs/local-runtime.md`);
    throw err;
  } finally {
    closeSync(fd);
  }
}

/**
 * The credentials of `dataDir` (which must exist): those its earlier starts made, and any part
 * missing made now (crypto-random) and written before it is used (temp file, fsync, rename:
 * never half-written), mode 0600.
 */
export function localCredentials(
  dataDir: string,
  log: (message: string) => void = () => {},
): LocalCredentials {
  const file = credentialsFile(dataDir);
  const raw = readOwn(file, log);
  const parsed = stored.safeParse(raw ?? {});
  if (!parsed.success) {
    throw new Error(`${file} is not what this runtime wrote there: restore it, or see docs/local-runtime.md`);
  }
  const made = fresh();
  const whole = {
    postgres: parsed.data.postgres ?? made.postgres,
    aws: parsed.data.aws ?? made.aws,
  };
  if (!parsed.data.postgres || !parsed.data.aws) writeJsonDurably(file, whole, 0o600);
  return { file, ...whole };
}

/**
 * The access key of a data directory a runtime has started on (for a client of its endpoints:
 * the CLI, a test); undefined when none was made there yet. Makes nothing.
 */
export function readLocalAwsCredentials(dataDir: string): LocalAwsCredentials | undefined {
  const parsed = stored.safeParse(readOwn(credentialsFile(dataDir), () => {}) ?? {});
  return parsed.success ? parsed.data.aws : undefined;
}
