// `node --import ./test/support/record-imports.mjs …`: appends the URL of every module the
// process imports (ESM resolution, dynamic imports included) to the file RECORD_IMPORTS_TO names,
// so a test can tell what a command loaded. Node's module customization hooks:
// https://nodejs.org/docs/latest-v20.x/api/module.html#customization-hooks
import { register } from 'node:module';

register('./record-imports-hooks.mjs', import.meta.url, { data: { file: process.env.RECORD_IMPORTS_TO } });
