import { createReadStream, existsSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { createInterface } from 'node:readline';

/**
 * Appends the journal lines a start could not read to `path` (one JSON line each: when, the
 * line's number and its text as it was) and fsyncs it: done before the journal is rewritten
 * without them, so a line is kept somewhere at every moment.
 */
export async function keepAside(
  path: string,
  lines: readonly { readonly lineNumber: number; readonly text: string; readonly torn: boolean }[],
  now: number,
): Promise<void> {
  const at = new Date(now).toISOString();
  const text = lines
    .map((l) => `${JSON.stringify({ keptAt: at, lineNumber: l.lineNumber, torn: l.torn, text: l.text })}\n`)
    .join('');
  const handle = await open(path, 'a', 0o600);
  try {
    await handle.appendFile(text);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** How many lines the keep-aside file holds (0 when there is none): what `/ops/status` counts. */
export async function countKeptAside(path: string): Promise<number> {
  if (!existsSync(path)) return 0;
  let n = 0;
  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  for await (const line of lines) if (line.trim()) n++;
  return n;
}
