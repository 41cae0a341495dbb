/**
 * The local runtime in a process of its own, for tests that SIGKILL it at a chosen moment:
 * `node --import tsx test/support/runtime-child.ts` with `PIPELINE_DATA_DIR` and
 * `PIPELINE_TEST_RUNTIME` (JSON: the options below). Prints `pipeline ready: <url>` as `npm start`
 * does, and `redelivery held: <consumer> <eventId>` when a held redrive reached its hand-over
 * (it then waits for good: the test kills the process there). Stops on SIGTERM.
 */
import { startRuntime } from '../../infra/local/runtime';

interface ChildOptions {
  /** Hold every ops redrive's hand-over to the bus (after an inbox redrive's reset). */
  readonly holdRedelivery?: boolean;
  /** The delivery audit's period and settings (a test shortens them). */
  readonly audit?: { readonly periodMs?: number; readonly settings?: Record<string, number> };
  /** Print the bus's PutEvents endpoint on the ready line too (`pipeline ready: <url> bus: <endpoint>`). */
  readonly printBus?: boolean;
}

const options = JSON.parse(process.env.PIPELINE_TEST_RUNTIME ?? '{}') as ChildOptions;
const dataDir = process.env.PIPELINE_DATA_DIR;
if (!dataDir) throw new Error('PIPELINE_DATA_DIR is not set');

const runtime = await startRuntime({
  dataDir,
  port: 0,
  audit: options.audit,
  log: (message, extra) => console.log(message, extra ? JSON.stringify(extra) : ''),
  beforeRedelivery: options.holdRedelivery
    ? (consumer, event) => {
        console.log(
          `redelivery held: ${consumer} ${String((event as { detail?: { id?: string } }).detail?.id)}`,
        );
        return new Promise<void>(() => undefined);
      }
    : undefined,
});
console.log(`pipeline ready: ${runtime.url}${options.printBus ? ` bus: ${runtime.bus.endpoint}` : ''}`);
process.once('SIGTERM', () => {
  void runtime.stop().then(() => process.exit(0));
});
