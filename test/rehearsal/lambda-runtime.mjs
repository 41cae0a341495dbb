// The Lambda Node.js runtime, as far as a rehearsal needs it, for one function in its own
// process (one process per function, as Lambda gives each function its own execution
// environment and so its own environment variables): import the bundled file, take its exported
// handler, and call it with (event, context) for each invocation the parent sends over IPC.
// A failing import is the function's init error (a bad environment fails its cold start).
//
// Plain JavaScript on purpose: it must run the bundles exactly as Lambda does, with nothing
// (tsx, vitest) loaded in front of them.
import { randomUUID } from 'node:crypto';
import { pathToFileURL } from 'node:url';

const [bundle, exportName = 'handler'] = process.argv.slice(2);
const functionName = process.env.AWS_LAMBDA_FUNCTION_NAME ?? 'function';
const started = performance.now();

const describe = (err) => ({
  name: err?.name ?? 'Error',
  message: err?.message ?? String(err),
  code: err?.code,
  fields: err?.details?.fields,
  stack: err?.stack,
});

let handler;
try {
  const module = await import(pathToFileURL(bundle).href);
  handler = module[exportName];
  if (typeof handler !== 'function') throw new TypeError(`${bundle} exports no function "${exportName}"`);
  process.send({ type: 'ready', initMs: performance.now() - started });
} catch (err) {
  process.send({ type: 'init-error', error: describe(err) });
  process.exit(1);
}

process.on('message', async (message) => {
  if (message?.type !== 'invoke') return;
  const deadline = Date.now() + message.timeoutMs;
  const requestId = randomUUID();
  const context = {
    awsRequestId: requestId,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: message.functionArn,
    memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE ?? '128',
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: requestId,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done() {},
    fail() {},
    succeed() {},
  };
  const at = performance.now();
  try {
    const result = await handler(message.event, context);
    process.send({
      type: 'result',
      id: message.id,
      result: result ?? null,
      durationMs: performance.now() - at,
    });
  } catch (err) {
    process.send({ type: 'error', id: message.id, error: describe(err), durationMs: performance.now() - at });
  }
});
