/**
 * The AWS SDK clients a Lambda bundle holds, by the service id each client's config defaults to
 * (`serviceId: config?.serviceId ?? "RDS Data"`, a string minifying keeps). The credential
 * chain's own clients (SSO, SSO OIDC, STS, Signin) are in every bundle and not listed. Read from
 * the bundle's text because that is what the function ships; a module graph would say what the
 * source imports, not what esbuild kept.
 */
const clientConfig = /serviceId:[\w$]+\?\.serviceId\?\?"([^"]+)"/g;
const credentialChain = new Set(['SSO', 'SSO OIDC', 'STS', 'Signin']);

export function sdkClientsIn(bundle: string): string[] {
  const found = new Set<string>();
  for (const [, id] of bundle.matchAll(clientConfig)) if (id && !credentialChain.has(id)) found.add(id);
  return [...found].sort();
}
