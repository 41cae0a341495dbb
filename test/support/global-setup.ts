import type { TestProject } from 'vitest/node';
import { startEmbeddedPostgres } from './embedded-pg';

declare module 'vitest' {
  export interface ProvidedContext {
    pgUrl: string;
  }
}

/** One embedded PostgreSQL 17 for the whole run; each test file makes its own database in it. */
export default async function setup(project: TestProject) {
  const pg = await startEmbeddedPostgres();
  project.provide('pgUrl', pg.url);
  return async () => {
    await pg.stop();
  };
}
