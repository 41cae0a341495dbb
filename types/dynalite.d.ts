// dynalite ships no types: just the part the local runtime, the tests and the benchmark use.
declare module 'dynalite' {
  import type { Server } from 'node:http';

  interface DynaliteOptions {
    /** LevelDB directory; in memory when absent. */
    path?: string;
    createTableMs?: number;
    deleteTableMs?: number;
    updateTableMs?: number;
    maxItemSizeKb?: number;
  }

  /** Returns a plain Node HTTP server speaking the DynamoDB API; call `listen` on it. */
  export default function dynalite(options?: DynaliteOptions): Server;
}
