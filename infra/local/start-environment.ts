import * as z from 'zod';
import { blankIsUnset, parseEnvironment } from '../../shared/env';
import { defaultPort } from '../../shared/local-port';

/** `npm start`'s settings. */
export interface StartEnvironment {
  /** PORT: the HTTP server's port on loopback; 0 picks a free one. */
  readonly PORT: number;
  /** PIPELINE_DATA_DIR: where the databases, the bus journal and the effects keep their data. */
  readonly PIPELINE_DATA_DIR: string;
  /** PIPELINE_DYNAMO: the DynamoDB engine. */
  readonly PIPELINE_DYNAMO: 'dynalite' | 'dynamodb-local';
  /** PIPELINE_FAULTS: fault injection in the local adapters (`parseFaults`). */
  readonly PIPELINE_FAULTS: string | undefined;
  /** PIPELINE_FAULT_SEED: the faults' seed, for a repeatable run. */
  readonly PIPELINE_FAULT_SEED: number | undefined;
  /** PIPELINE_CALLER: who the local server says every request comes from (the reviewer recorded); unset: `local:<OS user>`. */
  readonly PIPELINE_CALLER: string | undefined;
}

const startEnvironment = z.object({
  PORT: blankIsUnset(z.coerce.number().int().min(0).max(65535)),
  PIPELINE_DATA_DIR: blankIsUnset(z.string()),
  PIPELINE_DYNAMO: blankIsUnset(z.enum(['dynalite', 'dynamodb-local'])),
  PIPELINE_FAULTS: blankIsUnset(z.string()),
  PIPELINE_FAULT_SEED: blankIsUnset(z.coerce.number().int()),
  PIPELINE_CALLER: blankIsUnset(z.string().trim().min(1).max(200)),
});

/**
 * `npm start`'s environment, a blank variable counting as unset (as everywhere else, and as the
 * ops CLI reads PORT). Throws PipelineError CONFIG naming every bad variable.
 */
export function parseStartEnvironment(env: Readonly<Record<string, string | undefined>>): StartEnvironment {
  const e = parseEnvironment(startEnvironment, env, 'local runtime environment');
  return {
    PORT: e.PORT ?? defaultPort,
    PIPELINE_DATA_DIR: e.PIPELINE_DATA_DIR ?? './.pipeline',
    PIPELINE_DYNAMO: e.PIPELINE_DYNAMO ?? 'dynalite',
    PIPELINE_FAULTS: e.PIPELINE_FAULTS,
    PIPELINE_FAULT_SEED: e.PIPELINE_FAULT_SEED,
    PIPELINE_CALLER: e.PIPELINE_CALLER,
  };
}
