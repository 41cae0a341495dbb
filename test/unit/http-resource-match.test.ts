import { describe, expect, it } from 'vitest';
import { topology } from '../../functions/topology';
import { createResourceMatcher } from '../../shared/http/resource-match';
import { opsApiRoutes } from '../../shared/ops/ops-api';
import { tasksApiRoutes } from '../../shared/tasks/tasks-api';

describe('the local server picks the REST API resource a path names, as API Gateway does', () => {
  const match = createResourceMatcher([
    { resource: '/tasks', method: 'POST' },
    { resource: '/tasks/{taskId}', method: 'GET' },
    { resource: '/tasks/stats', method: 'GET' },
    { resource: '/tasks/{taskId}/approve', method: 'POST' },
  ]);

  it('fills the path parameters, URL-decoded, and null when the resource has none', () => {
    expect(match('/tasks/a%20b/approve')).toEqual({
      resource: '/tasks/{taskId}/approve',
      pathParameters: { taskId: 'a b' },
    });
    expect(match('/tasks')).toEqual({ resource: '/tasks', pathParameters: null });
  });

  it('prefers a literal segment to a path parameter, whichever the table lists first', () => {
    expect(match('/tasks/stats')).toEqual({ resource: '/tasks/stats', pathParameters: null });
    expect(match('/tasks/other')?.resource).toBe('/tasks/{taskId}');
  });

  it('reads a trailing slash as the same resource and matches no empty or extra segment', () => {
    expect(match('/tasks/')?.resource).toBe('/tasks');
    expect(match('/tasks//approve')).toBeUndefined();
    expect(match('//tasks')).toBeUndefined();
    expect(match('/tasks/x/approve/now')).toBeUndefined();
    expect(match('/Tasks')).toBeUndefined();
  });

  it('keeps a malformed escape as sent, for the route to refuse', () => {
    expect(match('/tasks/%E0%A4%A')?.pathParameters).toEqual({ taskId: '%E0%A4%A' });
  });

  it('finds every route of both APIs at its own resource', () => {
    const both = createResourceMatcher([...tasksApiRoutes, ...opsApiRoutes(topology.consumerNames)]);
    for (const { resource } of [...tasksApiRoutes, ...opsApiRoutes(topology.consumerNames)]) {
      const path = resource.replace(/\{(\w+)\}/g, 'value-of-$1');
      expect(both(path)?.resource, path).toBe(resource);
    }
  });
});
