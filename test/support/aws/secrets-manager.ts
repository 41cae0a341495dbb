import { randomUUID } from 'node:crypto';
import type { CallRecorder } from './calls';
import { closeServer, type LocalEndpoint, listenOnLoopback } from './http';
import { type JsonObject, stringField, stringsField } from './json';
import { awsJsonHandler, unknownOperation } from './json-service';
import { AwsFault, type AwsJsonProtocol } from './protocol';

const protocol: AwsJsonProtocol = { version: '1.1' };
const targetPrefix = 'secretsmanager';

/** A secret that exists from the start. */
export interface SecretDefinition {
  /** `arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 random characters>`. */
  readonly arn: string;
  readonly name: string;
  /** The AWSCURRENT value; a secret without one answers GetSecretValue with ResourceNotFound. */
  readonly secretString?: string;
}

/** How the Secrets Manager stand-in is set up. */
export interface SecretsManagerStandinOptions {
  readonly recorder: CallRecorder;
  readonly secrets?: readonly SecretDefinition[];
}

/** A running Secrets Manager stand-in (awsJson1_1). */
export interface SecretsManagerStandin extends LocalEndpoint {
  addSecret(secret: SecretDefinition): void;
  /** The AWSCURRENT SecretString of a secret named by ARN or name. */
  currentValue(secretId: string): string | undefined;
}

interface Version {
  readonly id: string;
  readonly secretString: string;
  readonly createdAt: number;
  readonly clientRequestToken?: string;
  stages: string[];
}

interface Secret {
  readonly arn: string;
  readonly name: string;
  readonly createdAt: number;
  lastChangedAt: number;
  readonly versions: Version[];
}

const notFound = () =>
  new AwsFault('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
const epochSeconds = (ms: number) => ms / 1_000;

/**
 * Starts a Secrets Manager stand-in on 127.0.0.1 (`X-Amz-Target: secretsmanager.<Op>`):
 * GetSecretValue (by VersionId or VersionStage, AWSCURRENT by default), DescribeSecret and
 * PutSecretValue (a new version becomes AWSCURRENT, the old one AWSPREVIOUS). A SecretId may be
 * the ARN, the ARN without its random suffix, or the name. Each call is recorded as
 * `secretsmanager:<Op>` on the secret's ARN (the SecretId as given when no secret matches).
 */
export async function startSecretsManagerStandin(
  options: SecretsManagerStandinOptions,
): Promise<SecretsManagerStandin> {
  const { recorder } = options;
  const secrets: Secret[] = [];

  function addSecret(definition: SecretDefinition): void {
    const now = Date.now();
    const secret: Secret = {
      arn: definition.arn,
      name: definition.name,
      createdAt: now,
      lastChangedAt: now,
      versions: [],
    };
    if (definition.secretString !== undefined) {
      secret.versions.push({
        id: randomUUID(),
        secretString: definition.secretString,
        createdAt: now,
        stages: ['AWSCURRENT'],
      });
    }
    secrets.push(secret);
  }
  for (const s of options.secrets ?? []) addSecret(s);

  function find(secretId: string | undefined): Secret | undefined {
    if (!secretId) return undefined;
    return secrets.find(
      (s) =>
        s.arn === secretId ||
        s.name === secretId ||
        (secretId.startsWith('arn:') && s.arn.replace(/-[A-Za-z0-9]{6}$/, '') === secretId),
    );
  }

  function secretOf(body: JsonObject): Secret {
    const secret = find(stringField(body, 'SecretId'));
    if (!secret) throw notFound();
    return secret;
  }

  const current = (secret: Secret) => secret.versions.find((v) => v.stages.includes('AWSCURRENT'));

  function getSecretValue(body: JsonObject): JsonObject {
    const secret = secretOf(body);
    const versionId = stringField(body, 'VersionId');
    const stage = stringField(body, 'VersionStage');
    const version = versionId
      ? secret.versions.find((v) => v.id === versionId && (!stage || v.stages.includes(stage)))
      : secret.versions.find((v) => v.stages.includes(stage ?? 'AWSCURRENT'));
    if (!version) {
      throw new AwsFault(
        'ResourceNotFoundException',
        versionId
          ? `Secrets Manager can't find the specified secret value for VersionId: ${versionId}`
          : `Secrets Manager can't find the specified secret value for staging label: ${stage ?? 'AWSCURRENT'}`,
      );
    }
    return {
      ARN: secret.arn,
      Name: secret.name,
      VersionId: version.id,
      SecretString: version.secretString,
      VersionStages: version.stages,
      CreatedDate: epochSeconds(version.createdAt),
    };
  }

  function describeSecret(body: JsonObject): JsonObject {
    const secret = secretOf(body);
    return {
      ARN: secret.arn,
      Name: secret.name,
      CreatedDate: epochSeconds(secret.createdAt),
      LastChangedDate: epochSeconds(secret.lastChangedAt),
      VersionIdsToStages: Object.fromEntries(
        secret.versions.filter((v) => v.stages.length > 0).map((v) => [v.id, v.stages]),
      ),
    };
  }

  function putSecretValue(body: JsonObject): JsonObject {
    const secret = secretOf(body);
    const secretString = stringField(body, 'SecretString');
    if (secretString === undefined) {
      throw new AwsFault('InvalidRequestException', 'You must provide either SecretString or SecretBinary.');
    }
    const token = stringField(body, 'ClientRequestToken');
    const replayed = token ? secret.versions.find((v) => v.clientRequestToken === token) : undefined;
    if (replayed) {
      // The same token is an idempotent retry only with the same value.
      if (replayed.secretString !== secretString) {
        throw new AwsFault('ResourceExistsException', `A resource with the ID you requested already exists.`);
      }
      return { ARN: secret.arn, Name: secret.name, VersionId: replayed.id, VersionStages: replayed.stages };
    }
    const stages = stringsField(body, 'VersionStages');
    const newStages = stages.length > 0 ? stages : ['AWSCURRENT'];
    // Moving AWSCURRENT makes the version that had it AWSPREVIOUS (and the old AWSPREVIOUS none).
    const movesCurrent = newStages.includes('AWSCURRENT');
    const previous = movesCurrent ? current(secret) : undefined;
    for (const v of secret.versions) {
      v.stages = v.stages.filter((s) => !newStages.includes(s) && !(movesCurrent && s === 'AWSPREVIOUS'));
    }
    previous?.stages.push('AWSPREVIOUS');
    const version: Version = {
      id: token ?? randomUUID(),
      secretString,
      createdAt: Date.now(),
      stages: newStages,
      ...(token ? { clientRequestToken: token } : {}),
    };
    secret.versions.push(version);
    secret.lastChangedAt = version.createdAt;
    return { ARN: secret.arn, Name: secret.name, VersionId: version.id, VersionStages: version.stages };
  }

  const { server, endpoint } = await listenOnLoopback(
    awsJsonHandler({
      service: 'secretsmanager',
      protocol,
      targetPrefix,
      recorder,
      authorize: (_operation, body) => {
        const secretId = stringField(body, 'SecretId');
        return { resources: [find(secretId)?.arn ?? secretId ?? '*'] };
      },
      serve(operation, body) {
        switch (operation) {
          case 'GetSecretValue':
            return getSecretValue(body);
          case 'DescribeSecret':
            return describeSecret(body);
          case 'PutSecretValue':
            return putSecretValue(body);
          default:
            throw unknownOperation(operation);
        }
      },
    }),
  );

  return {
    endpoint,
    addSecret,
    currentValue: (secretId) => {
      const secret = find(secretId);
      return secret ? current(secret)?.secretString : undefined;
    },
    close: () => closeServer(server),
  };
}
