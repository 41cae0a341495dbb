import type { TestProject } from 'vitest/node';
import {
  dynamoDbLocalUnavailable,
  type RunningDynamo,
  startDynalite,
  startDynamoDbLocal,
} from './dynamo-engines';

/** One DynamoDB engine a contract suite runs on, or the reason it cannot run here. */
export interface DynamoEngineInfo {
  readonly name: 'dynalite' | 'DynamoDB Local';
  readonly endpoint?: string;
  readonly skipReason?: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    dynamoEngines: DynamoEngineInfo[];
  }
}

/**
 * One dynalite and one DynamoDB Local for the whole run (the JVM takes seconds to start); each
 * test file makes its own tables. Without Java, DynamoDB Local is reported as skipped with the
 * reason, here and by every suite that would have used it. Java present but the engine failing
 * to start is an error, not a skip.
 */
export default async function setup(project: TestProject) {
  const running: RunningDynamo[] = [];
  const engines: DynamoEngineInfo[] = [];
  const lite = await startDynalite();
  running.push(lite);
  engines.push({ name: 'dynalite', endpoint: lite.endpoint });
  const unavailable = dynamoDbLocalUnavailable();
  if (unavailable) {
    console.warn(`[dynamo] DynamoDB Local contract suites are skipped: ${unavailable}`);
    engines.push({ name: 'DynamoDB Local', skipReason: unavailable });
  } else {
    const local = await startDynamoDbLocal();
    running.push(local);
    engines.push({ name: 'DynamoDB Local', endpoint: local.endpoint });
  }
  project.provide('dynamoEngines', engines);
  return async () => {
    await Promise.all(running.map((r) => r.stop()));
  };
}
