import { realpathSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type DocPage, writeSection } from '../../infra/docs/doc-section';

/**
 * True when the module at `moduleUrl` is the script node was started with, so a benchmark file
 * can run on its own (`npm run bench:relay`) and be imported by `bench/run.ts` without running.
 */
export function isMain(moduleUrl: string): boolean {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return pathToFileURL(realpathSync(resolve(entry))).href === moduleUrl;
  } catch {
    return false;
  }
}

/** Progress for a person watching: always stderr, so stdout stays the result alone. */
export function progress(message: string): void {
  process.stderr.write(`[bench] ${message}\n`);
}

/**
 * What `--docs` does for a benchmark: keeps its result as `bench/results/<file>` (the source the
 * docs tests render again) and writes `markdown` into section `section` of `page`.
 */
export function writeBenchDocs(
  file: string,
  result: unknown,
  page: DocPage,
  section: string,
  markdown: string,
): void {
  writeFileSync(new URL(`../results/${file}`, import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
  progress(`bench/results/${file} and ${writeSection(page, section, markdown)} updated`);
}

/** `--name N` from the command line, or `fallback`. */
export function numberArg(args: readonly string[], name: string, fallback: number): number {
  const at = args.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(args[at + 1]);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} takes a positive number`);
  return value;
}
