import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { withContextTable } from './settings';

// `npm run docs:settings`: writes docs/aws.md's context table from `settingSpecs`.
const page = fileURLToPath(new URL('../../docs/aws.md', import.meta.url));
writeFileSync(page, withContextTable(readFileSync(page, 'utf8')));
