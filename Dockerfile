# Production image: build in one stage, run with production dependencies only, as a
# non-root user. Nothing is downloaded at run time: Prisma runs without native engines
# (prisma.config.ts), so the image also works air-gapped.

FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY scripts/postinstall.mjs scripts/postinstall.mjs
COPY prisma ./prisma
COPY prisma.config.ts ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
COPY scripts/postinstall.mjs scripts/postinstall.mjs
COPY prisma ./prisma
COPY prisma.config.ts ./
# Production dependencies only (the Prisma CLI is one: it applies the migrations).
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
USER node
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/health/ready').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# Apply pending migrations, then serve. `exec` replaces the shell with node,
# so SIGTERM from `docker stop` reaches it and the close is graceful.
CMD ["sh", "-c", "node node_modules/prisma/build/index.js migrate deploy && exec node dist/server.js"]
