import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import middy from '@middy/core';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import * as z from 'zod';
import { sdkClientConfig, withInvocationDeadline } from '../../shared/aws/sdk-client';
import { createSqlClient, parseConfig } from '../../shared/config';
import { migrate } from '../../shared/db/migrate';
import { type RoleLogin, setRolePasswords } from '../../shared/db/roles';
import { blankIsUnset, jsonVariable, parseEnvironment } from '../../shared/env';
import { nudgePayload } from '../../shared/tasks/relay-nudger';

const config = parseConfig();
const { DB_ROLE_SECRETS: roleSecrets, RELAY_FUNCTION_NAME: relayFunction } = parseEnvironment(
  z.object({
    DB_ROLE_SECRETS: blankIsUnset(jsonVariable(z.record(z.string(), z.string().min(20)))),
    RELAY_FUNCTION_NAME: blankIsUnset(
      z.string().regex(/^[\w:.-]{1,170}$/, 'must be a Lambda function name or ARN'),
    ),
  }),
  process.env,
  'migrate configuration',
);
const logger = new Logger({ serviceName: 'migrate' });
const db = createSqlClient(config, 'owner');
const secrets = new SecretsManagerClient(sdkClientConfig());

const secretLogin = z.object({ username: z.string(), password: z.string() });

/** Reads each function role's login from its secret (the CDK-generated `username`/`password` JSON). */
async function roleLogins(arns: Readonly<Record<string, string>>): Promise<RoleLogin[]> {
  return Promise.all(
    Object.values(arns).map(async (arn) => {
      const out = await secrets.send(new GetSecretValueCommand({ SecretId: arn }));
      const parsed = secretLogin.safeParse(JSON.parse(out.SecretString ?? '{}'));
      if (!parsed.success) throw new Error(`secret ${arn} holds no username and password`);
      return parsed.data;
    }),
  );
}

/**
 * Runs the relay once and waits for it, so a new stack's relay has reported (relay-silent has
 * data) and anything committed before this deploy goes out. A failure is logged, never fails
 * the deploy: the sweeps run the relay anyway, and its errors are alarmed.
 */
async function firstRelayRun(functionName: string): Promise<void> {
  // It waits for the relay's run: bounded by this invocation's deadline, not by a request timeout.
  const lambda = new LambdaClient(sdkClientConfig('run'));
  try {
    const out = await lambda.send(
      new InvokeCommand({
        FunctionName: functionName,
        Payload: new TextEncoder().encode(JSON.stringify(nudgePayload)),
      }),
    );
    if (out.FunctionError) logger.warn('the first relay run failed', { functionError: out.FunctionError });
  } catch (err) {
    logger.warn('the first relay run could not be started', { error: err });
  } finally {
    lambda.destroy();
  }
}

/**
 * CDK custom resource (Provider framework `onEvent`): applies pending migrations on Create
 * and Update, then lets each function role log in with the password its secret holds (after a
 * rotation, a deploy with a new `-c roleCredentialsVersion` runs it again); does nothing on Delete (a stack deletion
 * never drops data). The physical id is fixed, so an update never makes CloudFormation delete
 * the old resource; the schema version is returned as `SchemaVersion` for stack outputs.
 */
export async function run(event: Pick<CloudFormationCustomResourceEvent, 'RequestType'>) {
  if (event.RequestType === 'Delete') return { PhysicalResourceId: 'content-pipeline-schema' };
  const result = await migrate(db);
  logger.info('migrations', { ...result });
  if (roleSecrets) {
    const logins = await roleLogins(roleSecrets);
    await setRolePasswords(db, logins);
    logger.info('role logins set', { roles: logins.map((l) => l.username) });
  }
  if (relayFunction) await firstRelayRun(relayFunction);
  const version = Math.max(0, ...result.applied, ...result.alreadyApplied);
  return { PhysicalResourceId: 'content-pipeline-schema', Data: { SchemaVersion: String(version) } };
}

export const handler = withInvocationDeadline(middy(run).use(injectLambdaContext(logger)));
