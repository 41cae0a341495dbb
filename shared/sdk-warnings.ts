/**
 * The oldest Node major the project supports (package.json `engines`: `>=20`; a test keeps the
 * two equal). Lambda runs Node 22; the local runtime, the ops CLI and the tests run on 20 and up,
 * and each of them quiets the notice below with this one switch.
 */
export const supportedNodeMajor = 20;

/**
 * Silences the AWS SDK's NodeVersionSupportWarning (a nine-line "use Node >= 22" notice printed
 * by the first SDK client built on Node 20) on the Node versions this project supports, through
 * the SDK's own switch for exactly that warning, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED
 * (@aws-sdk/core `emitWarningIfUnsupportedVersion`); every other warning still prints. A value the
 * user set is kept. Child processes inherit it with the environment.
 */
export function quietSdkNodeVersionWarning(
  env: NodeJS.ProcessEnv = process.env,
  nodeVersion: string = process.versions.node,
): void {
  const major = Number.parseInt(nodeVersion, 10);
  if (major >= supportedNodeMajor) env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
}
