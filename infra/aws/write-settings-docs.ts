import { writeSection } from '../docs/doc-section';
import { contextTable } from './settings';

// `npm run docs:settings`: writes docs/aws.md's context table (its `generated:settings` section) from `settingSpecs`.
process.stderr.write(`settings: ${writeSection('docs/aws.md', 'settings', contextTable())} updated\n`);
