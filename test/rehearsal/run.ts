/**
 * `npm run test:rehearsal`: the offline deploy rehearsal (see rehearsal.ts). Progress and
 * findings on stderr; one JSON line on stdout,
 * `{"functions","awsCalls","deniedCalls","conditionChecks","missingEnv"}`.
 * Exits 1 when a call would be denied, an environment is incomplete, or a step failed.
 */
// First: before any module below builds an AWS SDK client.
import '../../infra/local/quiet-sdk-warning';
import { runRehearsal } from './rehearsal';

const report = await runRehearsal({ log: (line) => process.stderr.write(`${line}\n`) });
for (const d of report.denied) {
  const context = d.context && Object.keys(d.context).length > 0 ? ` with ${JSON.stringify(d.context)}` : '';
  process.stderr.write(`DENIED ${d.caller}: ${d.action} on ${d.resource}${context}\n`);
}
for (const e of report.initErrors) {
  process.stderr.write(`COLD START FAILED ${e.function}: ${e.error.name}: ${e.error.message}\n`);
}
const failed = report.steps.filter((s) => !s.ok);
process.stdout.write(
  `${JSON.stringify({
    functions: report.functions,
    awsCalls: report.awsCalls,
    deniedCalls: report.deniedCalls,
    conditionChecks: report.conditionChecks,
    missingEnv: report.missingEnv,
  })}\n`,
);
process.exitCode = report.deniedCalls > 0 || report.missingEnv > 0 || failed.length > 0 ? 1 : 0;
