import * as z from 'zod';
import { parseEnvironment } from '../../shared/env';
import { topology } from '../../shared/topology';

/** Where the stack deploys: real AWS (Aurora + Data API) or LocalStack (PostgreSQL by URL). */
export type DeployTarget = 'aws' | 'localstack';

/** What a stage changes: whether data survives a `cdk destroy` and whether deletion is guarded. */
export type Stage = 'sandbox' | 'prod';

/** The settings the CDK app takes from `-c key=value` context, validated. */
export interface PipelineSettings {
  readonly stage: Stage;
  readonly target: DeployTarget;
  /** Alarm notifications go here (an SNS email subscription the owner must confirm). */
  readonly alarmEmail: string | undefined;
  /** LocalStack only: the PostgreSQL the functions reach (`DATABASE_URL`). */
  readonly databaseUrl: string;
  /** Aurora Serverless v2 capacity in ACUs; 0 lets the cluster auto-pause. */
  readonly dbMinCapacity: number;
  readonly dbMaxCapacity: number;
  /**
   * Reserved concurrency of the relay; `undefined` (the default) reserves none. A new account's
   * concurrency quota can be as low as 10, and Lambda refuses any reservation that would leave
   * fewer unreserved than its minimum, so a default reservation would fail the first deploy.
   * Reserve (`-c relayReservedConcurrency=3`) once the quota is raised, to cap relay runs.
   */
  readonly relayReservedConcurrency: number | undefined;
  /** The relay's safety sweep period in minutes (sandbox: the topology's hour; prod: 1). */
  readonly relaySweepMinutes: number;
  /** Whether the stack has a CloudWatch dashboard ($3 a month at list price; prod: yes, sandbox: no). */
  readonly dashboard: boolean;
  /**
   * Requests per second each tasks route (create, list, read, approve, reject, withdraw) takes before API
   * Gateway answers 429, burst twice that (at most the account's 5,000). Prod: 15,000, about
   * what Aurora's 128 ACU ceiling serves (`npm run capacity`: 7.7 ACU per 1,000 approvals/s),
   * so the throttle guards the database and the account's own API Gateway quota (10,000
   * requests/s by default, raised on request) binds first. Sandbox: 100 (raise it with
   * `-c apiRatePerSecond=2000`). Past 10,000 a second across all routes, raise the account's
   * quota: https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html
   */
  readonly apiRatePerSecond: number;
  /** Requests per second each ops route takes (an operator's tools), burst twice that. */
  readonly opsRatePerSecond: number;
  /** Bump it (`-c roleCredentialsVersion=2`) after putting new values in the role secrets: the deploy then resets the passwords. */
  readonly roleCredentialsVersion: string;
}

/** The prefix of every physical name the stack sets itself, so stages deploy side by side. */
export const resourcePrefix = (settings: Pick<PipelineSettings, 'stage'>): string =>
  `content-pipeline-${settings.stage}`;

/** The LocalStack default: the docker-compose PostgreSQL as the Lambda containers see it. */
export const defaultLocalStackDatabaseUrl = 'postgres://pipeline:pipeline@postgres:5432/pipeline';

// Context values arrive as strings from `-c`, as JSON values from cdk.json or tests.
const num = z.preprocess((v) => (typeof v === 'string' && v.trim() !== '' ? Number(v) : v), z.number());

const contextSchema = z
  .object({
    stage: z.enum(['sandbox', 'prod']).default('sandbox'),
    target: z.enum(['aws', 'localstack']).default('aws'),
    alarmEmail: z.email('must be an email address').optional(),
    databaseUrl: z
      .string()
      .regex(/^postgres(?:ql)?:\/\/\S+$/, 'must be a postgres:// URL')
      .default(defaultLocalStackDatabaseUrl),
    dbMinCapacity: num.pipe(z.number().min(0).max(256)).optional(),
    dbMaxCapacity: num.pipe(z.number().min(1).max(256)).optional(),
    relayReservedConcurrency: z
      .union([z.literal('none'), num.pipe(z.number().int().min(1).max(100))])
      .default('none'),
    relaySweepMinutes: num.pipe(z.number().int().min(1).max(1440)).optional(),
    dashboard: z.union([z.boolean(), z.enum(['true', 'false']).transform((v) => v === 'true')]).optional(),
    apiRatePerSecond: num.pipe(z.number().int().min(1).max(100_000)).optional(),
    opsRatePerSecond: num.pipe(z.number().int().min(1).max(10_000)).default(20),
    roleCredentialsVersion: z
      .union([z.string(), z.number()])
      .transform(String)
      .pipe(z.string().regex(/^[\w.-]{1,64}$/, 'must be a short version label'))
      .default('1'),
  })
  .refine((c) => (c.dbMinCapacity ?? 0) <= (c.dbMaxCapacity ?? 256), {
    message: 'dbMinCapacity must not exceed dbMaxCapacity',
    path: ['dbMinCapacity'],
  });

/** The context keys the app reads; anything else in context is CDK's own (feature flags). */
export const contextKeys = Object.keys(contextSchema.shape) as readonly string[];

/**
 * Reads the app's settings from CDK context. Throws one PipelineError CONFIG listing every bad
 * key, so a typo in `-c` fails the synth instead of deploying a default.
 */
export function parseSettings(tryGetContext: (key: string) => unknown): PipelineSettings {
  const raw = Object.fromEntries(contextKeys.map((k) => [k, tryGetContext(k)]));
  const c = parseEnvironment(
    contextSchema,
    Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined && v !== '')),
    'CDK context',
  );
  const prod = c.stage === 'prod';
  return {
    stage: c.stage,
    target: c.target,
    alarmEmail: c.alarmEmail,
    databaseUrl: c.databaseUrl,
    // Sandbox pauses when idle; prod keeps half an ACU warm so the first request is not a resume.
    dbMinCapacity: c.dbMinCapacity ?? (prod ? 0.5 : 0),
    // Prod's ceiling is sized by `npm run capacity` for 10,000 approvals/s (the database CPU the
    // statements measure, at a quarter vCPU per ACU, needs about 80 ACU there); Serverless v2
    // bills the capacity used, not the ceiling. A sandbox stays small: `-c dbMaxCapacity=N`.
    dbMaxCapacity: c.dbMaxCapacity ?? (prod ? 128 : 2),
    relayReservedConcurrency: c.relayReservedConcurrency === 'none' ? undefined : c.relayReservedConcurrency,
    // Prod's Aurora never pauses (0.5 ACU minimum), so sweeping it every minute costs nothing.
    relaySweepMinutes: c.relaySweepMinutes ?? (prod ? 1 : Math.round(topology.relay.sweepSeconds / 60)),
    dashboard: c.dashboard ?? prod,
    apiRatePerSecond: c.apiRatePerSecond ?? (prod ? 15_000 : 100),
    opsRatePerSecond: c.opsRatePerSecond,
    roleCredentialsVersion: c.roleCredentialsVersion,
  };
}
