/**
 * The order CloudFormation creates a template's resources in, and what each resource refers to.
 * CloudFormation creates a resource only after every resource it depends on: the ones it names
 * in `DependsOn` and the ones it reads through `Ref`, `Fn::GetAtt` or `Fn::Sub`
 * (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-dependson.html);
 * resources with no dependency between them may be created in any order or at once. Deletion
 * runs the other way round.
 */

/** A template resource, as much of it as its dependencies need. */
export interface OrderedResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
  readonly DependsOn?: string | readonly string[];
  readonly DeletionPolicy?: string;
}

/** The logical ids a value refers to through `Ref`, `Fn::GetAtt` and `Fn::Sub` (pseudo parameters left out). */
export function referencedIds(value: unknown, into: Set<string> = new Set()): Set<string> {
  if (Array.isArray(value)) {
    for (const v of value) referencedIds(v, into);
    return into;
  }
  if (typeof value !== 'object' || value === null) return into;
  for (const [key, v] of Object.entries(value)) {
    if (key === 'Ref' && typeof v === 'string') {
      if (!v.startsWith('AWS::')) into.add(v);
    } else if (key === 'Fn::GetAtt') {
      const target = Array.isArray(v) ? v[0] : typeof v === 'string' ? v.split('.')[0] : undefined;
      if (typeof target === 'string') into.add(target);
    } else if (key === 'Fn::Sub') {
      const [text, variables] = Array.isArray(v) ? [v[0], v[1]] : [v, undefined];
      const local = new Set(Object.keys((variables as Record<string, unknown> | undefined) ?? {}));
      for (const m of String(text).matchAll(/\$\{([^!}][^}]*)\}/g)) {
        const name = (m[1] ?? '').split('.')[0] ?? '';
        if (!name.startsWith('AWS::') && !local.has(name)) into.add(name);
      }
      if (variables) referencedIds(variables, into);
    } else {
      referencedIds(v, into);
    }
  }
  return into;
}

/** Every resource `id` must wait for: its `DependsOn` and the resources its properties read. */
export function dependenciesOf(
  resources: Readonly<Record<string, OrderedResource>>,
  id: string,
): ReadonlySet<string> {
  const r = resources[id];
  if (!r) throw new Error(`the template has no resource ${id}`);
  const deps = referencedIds(r.Properties ?? {});
  for (const d of typeof r.DependsOn === 'string' ? [r.DependsOn] : (r.DependsOn ?? [])) deps.add(d);
  // Parameters and conditions are no resources.
  return new Set([...deps].filter((d) => d in resources));
}

/**
 * One order CloudFormation may create the resources in: each after all it depends on, and
 * otherwise in the template's order (any such order is one CloudFormation may take, so a
 * resource that works only because it came first by chance is a defect the order can show).
 * Throws on a cycle, as CloudFormation refuses the template.
 */
export function creationOrder(resources: Readonly<Record<string, OrderedResource>>): string[] {
  const order: string[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (id: string, path: readonly string[]) => {
    const s = state.get(id);
    if (s === 'done') return;
    if (s === 'visiting') throw new Error(`circular dependency: ${[...path, id].join(' -> ')}`);
    state.set(id, 'visiting');
    for (const d of dependenciesOf(resources, id)) visit(d, [...path, id]);
    state.set(id, 'done');
    order.push(id);
  };
  for (const id of Object.keys(resources)) visit(id, []);
  return order;
}

/** Whether CloudFormation deletes the resource with the stack (a `Snapshot` deletes it too, keeping a snapshot). */
export function deletedWithStack(resource: OrderedResource): boolean {
  return resource.DeletionPolicy !== 'Retain' && resource.DeletionPolicy !== 'RetainExceptOnCreate';
}

/** Every resource `id` waits for, directly or through others. */
export function transitiveDependencies(
  resources: Readonly<Record<string, OrderedResource>>,
  id: string,
): ReadonlySet<string> {
  const seen = new Set<string>();
  const stack = [...dependenciesOf(resources, id)];
  while (stack.length > 0) {
    const next = stack.pop() as string;
    if (seen.has(next)) continue;
    seen.add(next);
    stack.push(...dependenciesOf(resources, next));
  }
  return seen;
}
